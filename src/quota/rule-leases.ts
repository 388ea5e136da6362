import type { BanPolicy, Quota } from '../config/plans-schema.js';
import type { LeaseGrant, LeaseRequest, QuotaNotice } from '../store/quota-store.js';
import { ruleSubject, sameRuleLimits, type RuleCharge, type RuleState } from './limit-rules.js';
import { QuotaLeases, type LeaseSettings } from './quota-leases.js';

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
  /** Each charge's lease (leaseOf), and the charge of each stand-in quota. */
  private readonly byCharge = new WeakMap<RuleCharge, { subject: string; quota: Quota }>();
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

  /** Whether this replica's lease of `rule`'s counter covers its cost now (QuotaLeases.covers). */
  covers(rule: RuleCharge): boolean {
    const { subject, quota } = this.leaseOf(rule);
    return this.leases.covers(subject, quota, NO_BAN, rule.cost);
  }

  /** Takes `rule`'s cost from the lease `covers` found covering it in this turn: the counter as of `nowMs`. */
  take(rule: RuleCharge, nowMs: number): RuleState {
    const count = this.leases.takeCount(this.leaseOf(rule).subject, rule.cost);
    return { startMs: nowMs - (nowMs % rule.windowMs), count, tatUs: 0 };
  }

  close(): Promise<void> {
    return this.leases.close();
  }

  /** A charge's lease subject and stand-in quota (one window: the rule's limit), made once per charge. */
  private leaseOf(rule: RuleCharge): { subject: string; quota: Quota } {
    let lease = this.byCharge.get(rule);
    if (!lease) {
      const subject = ruleSubject(rule);
      // A charge made anew for a counter leased here under the same rule (values too long for the
      // gateway's memo of charges, or evicted from it: gateway/limit-rules.ts) keeps that lease: a
      // stand-in quota of its own would end it at every request.
      const held = this.leases.quotaOf(subject);
      const heldRule = held && this.charges.get(held);
      if (held && heldRule && sameRuleLimits(heldRule, rule)) lease = { subject, quota: held };
      else {
        // The rule's limit as the only bound (the script reads the rule's; this quota only names the lease).
        lease = { subject, quota: { perMinute: rule.limit, perDay: rule.limit } };
        this.charges.set(lease.quota, rule);
      }
      this.byCharge.set(rule, lease);
    }
    return lease;
  }
}

/** A rule has no ban: its refusals count towards none (limit-rules.ts). */
const NO_BAN: BanPolicy = Object.freeze({ afterRejections: 0, window: 60, duration: 0 });
