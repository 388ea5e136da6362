import type { CostRule } from '../config/routes-schema.js';
import type { ReportedCost } from '../policies/reported-cost/reported-cost-schema.js';
import { patternToRegExp } from './route-rules.js';
import { RouteTable } from './route-table.js';

/**
 * gateway.yaml `routes.costs`, compiled once per load: how many quota units a request consumes.
 * Same path patterns as the deprecation rules (route-table.ts: first match wins, GET covers HEAD);
 * a request no rule matches costs 1. A rule may instead name a cost the upstream reports.
 */
export class RouteCosts {
  private readonly table: RouteTable<number | ReportedCost>;

  constructor(rules: readonly CostRule[]) {
    this.table = new RouteTable(rules.map((rule) => ({ method: rule.method, pattern: patternToRegExp(rule.path), value: rule.cost })));
  }

  /** Units of every window that a request for `method` and `path` (no query string) consumes (a reported cost: its reservation). */
  costOf(method: string, path: string): number {
    const cost = this.table.match(method, path) ?? 1;
    return typeof cost === 'number' ? cost : cost.reserve;
  }

  /**
   * The rule of the request: a fixed number of units (1 when no rule matches), or the cost its
   * upstream reports; `fallback` (the service's `cost:`) when no rule matches.
   */
  ruleOf(method: string, path: string, fallback?: ReportedCost): number | ReportedCost {
    return this.table.match(method, path) ?? fallback ?? 1;
  }
}
