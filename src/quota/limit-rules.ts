import type { WindowReport } from './rate-limit-headers.js';
import { admitUs, fitsAtUs, remainingAt, type GcraWindow } from './gcra.js';

/**
 * Limit rules' counters (gateway.yaml `limits`, docs/policies.md): the rules once, as quota-state.ts
 * is for the plan's windows. The memory stores run these functions; the Redis scripts
 * (store/redis/limit-rules-script.ts) their transcription. A request that matches rules is decided
 * with the plan in one step: every rule is checked first, and only when all fit does the plan's
 * step run; the rules are charged only when the plan admits too. A rule's refusal counts towards
 * no ban (a plan's does): a per-address or per-tenant limit is shared with callers a consumer does
 * not control, and a ban is the consumer's alone.
 */

/** One rule as a request's quota step applies it: its limit, and the counter its values name (Redis: src/store/redis/redis-keys.ts limitKey). */
export interface RuleCharge {
  /** The rule's name (RateLimit-Policy, metrics). */
  name: string;
  /** Names the counter with `name`: a keyed digest of the request's values of `by`, never the values in clear. */
  digest: string;
  limit: number;
  windowMs: number;
  /** gcra: a cell rate over the window (gcra.ts maths, with this window's length). */
  gcra: boolean;
  intervalUs: number;
  burst: number;
  /** Units this request takes from the rule. */
  cost: number;
}

/**
 * The subject a rule counter's leases go by (rule-leases.ts), beside consumers' ids and `owner:`:
 * the rule's name and digest, as its Redis key (redis-keys.ts limitKey, limitSubject) names them.
 */
export const ruleSubjectOf = (name: string, digest: string) => `limit:${name}:${digest}`;
export const ruleSubject = (rule: RuleCharge) => ruleSubjectOf(rule.name, rule.digest);
/** Whether a lease subject is a rule counter's (ruleSubject), not a consumer's or an owner's. */
export const isRuleSubject = (subject: string) => subject.startsWith('limit:');

/** Two charges under the same limits (a reload may change a rule's limits while its counter's name stays). */
export function sameRuleLimits(a: RuleCharge, b: RuleCharge): boolean {
  return (
    a === b ||
    (a.limit === b.limit &&
      a.windowMs === b.windowMs &&
      a.gcra === b.gcra &&
      a.intervalUs === b.intervalUs &&
      a.burst === b.burst &&
      a.cost === b.cost)
  );
}

/** A rule counter as of a moment: a fixed window's start and count, and a gcra rule's TAT (µs; 0 when past). */
export interface RuleState {
  startMs: number;
  count: number;
  tatUs: number;
}

export const EMPTY_RULE: RuleState = Object.freeze({ startMs: 0, count: 0, tatUs: 0 });

/** The cell rate of a gcra rule: gcra.ts's minute, over the rule's window. */
export function ruleGcra(limit: number, windowMs: number, burst: number | undefined): GcraWindow {
  const b = Math.min(burst ?? 1, limit);
  return { limit, burst: b, intervalUs: Math.ceil((windowMs * 1000) / (limit - b + 1)) };
}

/** The counter as of `nowMs`: a window that has ended and a TAT that has passed read as zero. */
export function ruleCurrent(previous: RuleState, nowMs: number, rule: RuleCharge): RuleState {
  const startMs = nowMs - (nowMs % rule.windowMs);
  return {
    startMs,
    count: previous.startMs === startMs ? previous.count : 0,
    tatUs: previous.tatUs > nowMs * 1000 ? previous.tatUs : 0,
  };
}

/** The counter after admitting the request's cost, or null when it does not fit (`state` is current). */
export function ruleAdmit(state: RuleState, nowMs: number, rule: RuleCharge): RuleState | null {
  if (rule.gcra) {
    const tatUs = admitUs(rule, state.tatUs, nowMs * 1000, rule.cost);
    return tatUs === null ? null : { ...state, count: state.count + rule.cost, tatUs };
  }
  return state.count + rule.cost <= rule.limit ? { ...state, count: state.count + rule.cost } : null;
}

/** When the counter reads as empty: its window's end, or its TAT. Stores forget it then. */
export function ruleExpiresAtMs(state: RuleState, rule: RuleCharge): number {
  return Math.max(state.startMs + rule.windowMs, Math.ceil(state.tatUs / 1000));
}

/**
 * Every rule of a request checked on current counters: their states, and the index of a rule that
 * does not fit (-1: all fit). Nothing is charged.
 */
export function checkRules(states: RuleState[], nowMs: number, rules: readonly RuleCharge[]): { admitted: RuleState[]; refusedBy: number } {
  const admitted: RuleState[] = [];
  let refusedBy = -1;
  rules.forEach((rule, i) => {
    const next = ruleAdmit(states[i]!, nowMs, rule);
    if (next) admitted.push(next);
    else {
      admitted.push(states[i]!);
      if (refusedBy < 0) refusedBy = i;
    }
  });
  return { admitted, refusedBy };
}

/** What the headers say of a rule after a decision (rate-limit-headers.ts's window report, named by the rule). */
export type RuleReport = Omit<WindowReport, 'name'> & { name: string };

export function ruleReport(rule: RuleCharge, state: RuleState, nowMs: number): RuleReport {
  const windowSeconds = rule.windowMs / 1000;
  if (rule.gcra) {
    const remaining = remainingAt(rule, state.tatUs, nowMs * 1000);
    const resetAtMs = remaining >= rule.burst ? nowMs : Math.ceil(fitsAtUs(rule, state.tatUs, remaining + 1) / 1000);
    const fitsAtMs = remaining >= rule.cost ? nowMs : Math.ceil(fitsAtUs(rule, state.tatUs, rule.cost) / 1000);
    return { name: rule.name, limit: rule.limit, remaining, windowSeconds, resetAtMs, fitsAtMs };
  }
  const remaining = Math.max(0, rule.limit - (state.startMs === nowMs - (nowMs % rule.windowMs) ? state.count : 0));
  const resetAtMs = nowMs - (nowMs % rule.windowMs) + rule.windowMs;
  return { name: rule.name, limit: rule.limit, remaining, windowSeconds, resetAtMs, fitsAtMs: remaining >= rule.cost ? nowMs : resetAtMs };
}
