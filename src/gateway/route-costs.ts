import type { CostRule } from '../config/routes-schema.js';
import { patternToRegExp } from './route-rules.js';

/**
 * gateway.yaml `routes.costs`, compiled once per load: how many quota units a request consumes.
 * Same path patterns as the deprecation rules (route-rules.ts); the first matching rule wins and a
 * request no rule matches costs 1.
 */
export class RouteCosts {
  private readonly byMethod = new Map<string, Array<{ pattern: RegExp; cost: number }>>();

  constructor(rules: readonly CostRule[]) {
    for (const rule of rules) {
      const compiled = { pattern: patternToRegExp(rule.path), cost: rule.cost };
      // HEAD is GET without a body (RFC 9110 §9.3.2): probing a costly GET with HEAD costs the same.
      for (const method of rule.method === 'GET' ? ['GET', 'HEAD'] : [rule.method]) {
        const list = this.byMethod.get(method) ?? [];
        list.push(compiled);
        this.byMethod.set(method, list);
      }
    }
  }

  /** Units of every window that a request for `method` and `path` (no query string) consumes. */
  costOf(method: string, path: string): number {
    const candidates = this.byMethod.get(method);
    if (!candidates) return 1;
    for (const rule of candidates) if (rule.pattern.test(path)) return rule.cost;
    return 1;
  }
}
