import type { BanPolicy, Quota } from '../config/plans-schema.js';
import type { Logger } from '../observability/log.js';
import type { QuotaOutcome } from '../quota/quota-state.js';
import { MemoryQuotaStore } from '../store/memory/memory-quota-store.js';
import type { QuotaStore, RulesOutcome, SlotClaim, SlotStore } from '../store/quota-store.js';
import { MemoryRuleCounters } from '../store/memory/memory-rule-counters.js';
import type { RuleCharge } from '../quota/limit-rules.js';
import { DegradedLedger } from './degraded-ledger.js';
import { inWholeTerms, LocalShare } from './local-share.js';

export type StoreFailureMode = 'local' | 'open' | 'closed';

/**
 * Quotas while the shared store is unreachable, in the configured mode, and the way back:
 * `local` decides on this replica's share of what was left (local-share.ts) in memory; `local` and
 * `open` record what they admit (degraded-ledger.ts), and once Redis answers again it gets all of
 * it, once. The in-memory counts start afresh only after everything was added to Redis (until
 * then they stay, which can only make the next outage stricter).
 */
export class DegradedMode {
  private readonly share: LocalShare;
  private readonly ledger?: DegradedLedger;
  /**
   * Limit rules while Redis is away: each replica enforces its share of every rule's limit
   * (limit / replicas, at least 1), from zero: unlike the plan's windows, a rule's counts are not
   * heard from Redis (there are too many counters), so the fleet admits at most the limit plus what
   * was admitted through Redis in that window before it went (docs/policies.md).
   */
  private readonly rules: MemoryRuleCounters;
  private store: MemoryQuotaStore;

  constructor(
    readonly mode: StoreFailureMode,
    private readonly replicas: number,
    shared: QuotaStore,
    logger: Logger,
    maxSubjects: number,
    private readonly now: () => number = Date.now,
  ) {
    this.share = new LocalShare(maxSubjects, replicas);
    this.rules = new MemoryRuleCounters((limit) => this.shareOf(limit));
    this.store = new MemoryQuotaStore(undefined, undefined, this.rules);
    if (shared.reconcile && mode !== 'closed') this.ledger = new DegradedLedger(shared, logger);
  }

  /** Every decision of the shared store: the counts a later share is taken from. */
  heard(subject: string, outcome: QuotaOutcome): void {
    this.share.remember(subject, outcome);
  }

  /**
   * An outcome for an answer given without a decision (shed, or refused in `closed` mode): the
   * counts this replica last heard from Redis in the windows current now (local-share.ts), for
   * headers (rate-limit-headers.ts `undecidedHeaders`).
   */
  lastHeard(subject: string, quota: Quota, cost: number): QuotaOutcome {
    const nowMs = this.now();
    const used = this.share.usedAt(subject, quota, nowMs);
    return { verdict: 'allowed', ...used, rejections: 0, nowMs, bannedUntilMs: 0, cost, minuteTatUs: 0 };
  }

  /**
   * `local` mode's decision for one request, told in the whole quota's terms (the headers show the
   * plan's limit, and as remaining what this replica may still admit alone). With `slot`
   * (maxConcurrent), the request also takes a slot of this replica's share of the limit,
   * max / replicas (at least 1), in this process: `slots` gives it back.
   */
  async decide(
    subject: string,
    quota: Quota,
    ban: BanPolicy,
    cost: number,
    slot?: SlotClaim,
  ): Promise<{ outcome: QuotaOutcome; quota: Quota; slot?: SlotClaim; slots: SlotStore }> {
    const share = this.share.shareOf(subject, quota, this.now());
    const ownSlot = slot && { ...slot, max: this.shareOf(slot.max) };
    const store = this.store;
    const outcome = await store.consume(subject, share, ban, cost, undefined, undefined, ownSlot);
    return { ...this.told(subject, quota, share, outcome), slot: ownSlot, slots: store.slots };
  }

  /** `decide` for a request matching limit rules: the rules on this replica's share of each (`rules`, for the headers). */
  async decideRules(
    subject: string,
    quota: Quota,
    ban: BanPolicy,
    cost: number,
    charges: readonly RuleCharge[],
  ): Promise<{ outcome: RulesOutcome; quota: Quota; rules: RuleCharge[] }> {
    const share = this.share.shareOf(subject, quota, this.now());
    const outcome = await this.store.consumeRules(subject, share, ban, cost, charges);
    const told = this.told(subject, quota, share, outcome);
    return { ...told, outcome: { ...told.outcome, rules: outcome.rules, refusedBy: outcome.refusedBy }, rules: this.rules.scaled(charges) };
  }

  /** `local` mode's slots in this process: a limit rule's maxConcurrent while Redis is away (rule-slots.ts). */
  get localSlots(): SlotStore {
    return this.store.slots;
  }

  /** This replica's share of a fleet-wide limit: limit / replicas, at least 1. */
  shareOf(limit: number): number {
    return Math.max(1, Math.floor(limit / this.replicas));
  }

  private told(subject: string, quota: Quota, share: Quota, outcome: QuotaOutcome): { outcome: QuotaOutcome; quota: Quota } {
    this.ledger?.record(subject, outcome, quota);
    // The whole quota's limits, the month's too: inWholeTerms counts the month in them.
    const whole = {
      ...share,
      perMinute: quota.perMinute,
      perDay: quota.perDay,
      ...(quota.perMonth !== undefined && { perMonth: quota.perMonth }),
    };
    return { outcome: inWholeTerms(quota, share, outcome), quota: whole };
  }

  /** `open` mode admitted a request unmetered: Redis still gets its units when it is back. */
  admittedOpen(subject: string, cost: number, quota?: Quota): void {
    this.ledger?.record(subject, { verdict: 'allowed', nowMs: this.now(), cost, bannedUntilMs: 0 }, quota);
  }

  /** The shared store answers again: add what was admitted meanwhile. */
  recovered(): void {
    if (!this.ledger || this.ledger.empty) return;
    void this.ledger.flush().then((all) => {
      if (all) this.store = new MemoryQuotaStore(undefined, undefined, this.rules);
    });
  }

  close(): void {
    this.ledger?.close();
  }
}
