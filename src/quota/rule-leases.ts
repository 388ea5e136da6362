import type { BanPolicy, Quota } from '../config/plans-schema.js';
import type { LeaseGrant, LeaseRequest, QuotaNotice } from '../store/quota-store.js';
import { ruleSubject, type RuleCharge, type RuleState } from './limit-rules.js';
import { QuotaLeases, type LeaseSettings } from './quota-leases.js';
import type { QuotaOutcome } from './quota-state.js';

/**
 * Leases of limit rules' counters (docs/policies.md, "Leases of rule counters"): a hot rule
 * counter far from its limit is admitted here without a Redis round trip, on the rule the plan's
 * leases follow (quota-leases.ts; docs/quota-leases.md), by the same code: each counter is a
 * lease subject (`limit:<name>:<digest>`) whose one window is the rule's, and RULE_LEASE_SCRIPT
 * (store/redis/rule-lease-script.ts) grants and takes back its blocks. So: a block taken in one
 * atomic step, only for hot counters, at most what is left / (spread × replicas) and none below
 * minBlock, never used past the end of the rule's window it was granted in (a second, minute,
 * hour or day: `LeaseGrant.windowMs`), renewed at half, given back once (numbered; no more than
 * leases hold, so a Redis restarted empty takes nothing back), with notices, and recalled before
 * a rule's refusal is final (RULES_QUOTA_SCRIPT).
 *
 * Only fixed windows take leases, a perSecond rule's too (its blocks live less than a second, so
 * a hot counter asks about once a second, one command for a block of up to maxBlock requests). A
 * gcra rule would need the plan's gcra lease maths (charged at the latest use) transcribed for a
 * rule's TAT, which is not done: gcra rules stay on the script path.
 *
 * A request is admitted here only when every rule it matches and the plan each hold the units on
 * a lease here (enforce-quota.ts): all taken in one turn, or none, so a request is never charged
 * by one and refused by another here either.
 */
export class RuleLeases {
  readonly leases: QuotaLeases;
  /** Each charge's stand-in quota (one window: the rule's limit), and back. */
  private readonly quotas = new WeakMap<RuleCharge, Quota>();
  private readonly charges = new WeakMap<Quota, RuleCharge>();

  constructor(
    store: {
      reserveRule(rule: RuleCharge, request: LeaseRequest): Promise<LeaseGrant>;
      notices?(apply: (notice: QuotaNotice) => void, gap: () => void): void;
    },
    settings: LeaseSettings,
    now?: () => number,
  ) {
    const reserve = (_subject: string, quota: Quota, _ban: BanPolicy, request: LeaseRequest) =>
      store.reserveRule(this.charges.get(quota)!, request);
    this.leases = new QuotaLeases({ reserve, notices: store.notices?.bind(store) }, settings, now);
  }

  /** Whether a rule's counter can take leases at all (above). */
  static leasable(rule: RuleCharge): boolean {
    return !rule.gcra;
  }

  /**
   * The step that takes `rule`'s cost from this replica's lease of its counter and tells the
   * counter's state, when the lease covers it now (QuotaLeases.covering); else undefined.
   */
  covering(rule: RuleCharge): (() => RuleState) | undefined {
    const take = this.leases.covering(ruleSubject(rule), this.quotaOf(rule), NO_BAN, rule.cost);
    return take && (() => stateOf(rule, take()));
  }

  /** A subject's recalled request waits here when the subject is a rule counter's (rule-leases' recall). */
  static isRuleSubject(subject: string): boolean {
    return subject.startsWith('limit:');
  }

  close(): Promise<void> {
    return this.leases.close();
  }

  private quotaOf(rule: RuleCharge): Quota {
    let quota = this.quotas.get(rule);
    if (!quota) {
      // The rule's limit as the only bound (the script reads the rule's; this quota only names the lease).
      quota = { perMinute: rule.limit, perDay: rule.limit };
      this.quotas.set(rule, quota);
      this.charges.set(quota, rule);
    }
    return quota;
  }
}

/** A rule has no ban: its refusals count towards none (limit-rules.ts). */
const NO_BAN: BanPolicy = Object.freeze({ afterRejections: 0, window: 60, duration: 0 });

/** The counter as a leased answer tells it: Redis's count as last heard less this lease's unused units. */
function stateOf(rule: RuleCharge, outcome: QuotaOutcome): RuleState {
  return { startMs: outcome.nowMs - (outcome.nowMs % rule.windowMs), count: outcome.minuteCount, tatUs: 0 };
}
