import { checkRules, EMPTY_RULE, ruleCurrent, ruleExpiresAtMs, type RuleCharge, type RuleState } from '../../quota/limit-rules.js';
import { MINUTE_MS } from '../../quota/windows.js';

/**
 * Limit rules' counters of one process (the embedded store, and each replica's own while Redis is
 * unreachable): check every rule of a request, then charge all of them or none. The rules are
 * quota/limit-rules.ts's; `scale` turns a rule's limit into this replica's share of it (degraded mode).
 */
export class MemoryRuleCounters {
  private readonly counters = new Map<string, { state: RuleState; expiresAtMs: number }>();
  private sweepAtMs = 0;

  constructor(private readonly scale: (limit: number) => number = (limit) => limit) {}

  /** The rules as this store enforces them (its share of each limit). */
  scaled(rules: readonly RuleCharge[]): RuleCharge[] {
    return rules.map((rule) => {
      const limit = this.scale(rule.limit);
      if (limit === rule.limit) return rule;
      // A gcra rule's interval follows its limit; its burst stays within it.
      const burst = Math.min(rule.burst, limit);
      return rule.gcra
        ? { ...rule, limit, burst, intervalUs: Math.ceil((rule.windowMs * 1000) / (limit - burst + 1)) }
        : { ...rule, limit };
    });
  }

  /** Every rule checked on its current counter, nothing charged: the states and the first refusing rule (-1: none). */
  check(rules: readonly RuleCharge[], nowMs: number): { current: RuleState[]; admitted: RuleState[]; refusedBy: number } {
    this.sweep(nowMs);
    const current = rules.map((rule) => {
      const stored = this.counters.get(counterOf(rule));
      return ruleCurrent(stored && stored.expiresAtMs > nowMs ? stored.state : EMPTY_RULE, nowMs, rule);
    });
    return { current, ...checkRules(current, nowMs, rules) };
  }

  /** Keeps the states `check` admitted: the request was admitted by every rule and the plan. */
  charge(rules: readonly RuleCharge[], admitted: readonly RuleState[]): void {
    rules.forEach((rule, i) =>
      this.counters.set(counterOf(rule), { state: admitted[i]!, expiresAtMs: ruleExpiresAtMs(admitted[i]!, rule) }),
    );
  }

  private sweep(nowMs: number): void {
    if (nowMs < this.sweepAtMs) return;
    this.sweepAtMs = nowMs + MINUTE_MS;
    for (const [key, stored] of this.counters) if (stored.expiresAtMs <= nowMs) this.counters.delete(key);
  }
}

const counterOf = (rule: RuleCharge) => `${rule.name}:${rule.digest}`;
