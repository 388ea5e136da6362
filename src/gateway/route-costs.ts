import type { CostRule } from '../config/routes-schema.js';
import { patternToRegExp } from './route-rules.js';
import { RouteTable } from './route-table.js';

/**
 * gateway.yaml `routes.costs`, compiled once per load: how many quota units a request consumes.
 * Same path patterns as the deprecation rules (route-table.ts: first match wins, GET covers HEAD);
 * a request no rule matches costs 1.
 */
export class RouteCosts {
  private readonly table: RouteTable<number>;

  constructor(rules: readonly CostRule[]) {
    this.table = new RouteTable(rules.map((rule) => ({ method: rule.method, pattern: patternToRegExp(rule.path), value: rule.cost })));
  }

  /** Units of every window that a request for `method` and `path` (no query string) consumes. */
  costOf(method: string, path: string): number {
    return this.table.match(method, path) ?? 1;
  }
}
