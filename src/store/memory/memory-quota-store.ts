import type { BanPolicy, Quota } from '../../config/plans-schema.js';
import {
  decide,
  EMPTY_STATE,
  expiresAtMs,
  lift,
  peek,
  settle,
  type QuotaOutcome,
  type QuotaState,
  type Settlement,
  TAT_MOVES_KEPT,
  type TatMove,
} from '../../quota/quota-state.js';
import { MINUTE_MS } from '../../quota/windows.js';
import type { CreditChange, CreditResult, QuotaStore, RulesOutcome, SettleResult, SlotClaim } from '../quota-store.js';
import { usageHourStartMs, usagePeriodsAt } from '../../quota/usage-hours.js';
import type { MemoryUsage } from './memory-usage.js';
import type { RuleCharge } from '../../quota/limit-rules.js';
import { MemoryRuleCounters } from './memory-rule-counters.js';
import { MemorySlotStore } from './memory-slot-store.js';

interface Stored {
  state: QuotaState;
  /** From the rules (expiresAtMs), as Redis's PEXPIREAT: the state reads as empty from then on. */
  expiresAtMs: number;
}

/**
 * Quotas of one process in memory: the embedded store, and each replica's local limiter while
 * Redis is unreachable. It only stores: the rules are quota-state.ts's. The clock is injected so
 * tests can cross window edges without waiting.
 */
export class MemoryQuotaStore implements QuotaStore {
  private readonly states = new Map<string, Stored>();
  /** Credit balances, apart from the windows: they never expire with them. */
  private readonly balances = new Map<string, number>();
  private sweepAtMs = 0;
  /** Settlements applied, by id, until when their id is remembered (as Redis's SETTLE markers). */
  private readonly settled = new Map<string, number>();
  /**
   * gcra: each key's TAT moves down (quota-state.ts TatMoves; SETTLE_SCRIPT's tg:tat-moves): the
   * last TAT_MOVES_KEPT, and the last one's number, kept as long as the key's state (Redis keeps
   * the number in the quota hash).
   */
  private readonly moves = new Map<string, { lastNo: number; kept: TatMove[] }>();

  /** Concurrency slots, taken in the same step as the windows (`consume`'s `slot`). */
  readonly slots: MemorySlotStore;
  /** Rule counters are charged only when a request is admitted (memory-rule-counters.ts). */
  readonly rulesOnlyFill = true;
  /** `usageRows`: usage for invoicing, kept by the embedded store (not by a replica's local limiter: reconcile adds that); `rules`: the limit rules' counters (a degraded replica's hold its share of each limit). */
  constructor(
    private readonly now: () => number = Date.now,
    private readonly usageRows?: MemoryUsage,
    private readonly rules = new MemoryRuleCounters(),
  ) {
    this.slots = new MemorySlotStore(now);
  }

  /** Rules checked first; the plan decided only when all fit; the rules charged only when it admits (limit-rules.ts). */
  async consumeRules(keyId: string, quota: Quota, ban: BanPolicy, cost: number, charges: readonly RuleCharge[]): Promise<RulesOutcome> {
    const nowMs = this.now();
    const rules = this.rules.scaled(charges);
    const checked = this.rules.check(rules, nowMs);
    const plan = peek(this.read(keyId, nowMs), nowMs, quota.calendar);
    if (plan.verdict === 'banned') {
      // A refusal of the plan's ban, counted in usage as the script's step counts it (its rules not charged).
      const banned = { ...plan, cost };
      if (this.usageRows) this.keepUsage(keyId, banned, quota);
      return { ...banned, rules: checked.current, refusedBy: -1 };
    }
    if (checked.refusedBy >= 0) return { ...plan, verdict: 'limited', cost, rules: checked.current, refusedBy: checked.refusedBy };
    const outcome = await this.consume(keyId, quota, ban, cost);
    if (outcome.verdict !== 'allowed') return { ...outcome, rules: checked.current, refusedBy: -1 };
    this.rules.charge(rules, checked.admitted);
    return { ...outcome, rules: checked.admitted, refusedBy: -1 };
  }

  async consume(
    keyId: string,
    quota: Quota,
    ban: BanPolicy,
    cost = 1,
    _batched?: unknown,
    _recall?: unknown,
    slot?: SlotClaim,
  ): Promise<QuotaOutcome> {
    const nowMs = this.now();
    this.sweep(nowMs);
    const previous = this.read(keyId, nowMs);
    const takeSlot = slot && (() => this.slots.takeNow(keyId, slot));
    const { state, outcome } = decide(previous, nowMs, quota, ban, cost, takeSlot);
    // gcra: the number a settlement of it finds the moves since by (quota-state.ts TatMoves); a
    // state's first step numbers from its time in µs, as QUOTA_STEP does.
    const moves = this.moves.get(keyId);
    const moveNo = moves?.lastNo || (quota.algorithm === 'gcra' ? nowMs * 1000 : 0);
    if (moveNo) outcome.moveNo = moveNo;
    if (this.usageRows) this.keepUsage(keyId, outcome, quota);
    // A decision that changed nothing (a ban in force, a balance that cannot pay) stores nothing,
    // as the script writes nothing: its expiry stays the one computed when it was written.
    if (state === previous) return outcome;
    if (moveNo && !moves?.lastNo) this.moves.set(keyId, { lastNo: moveNo, kept: moves?.kept ?? [] });
    this.store(keyId, state, ban);
    return outcome;
  }

  async settle(keyId: string, quota: Quota, ban: BanPolicy, settlement: Settlement & { id: string }): Promise<SettleResult> {
    const nowMs = this.now();
    this.sweep(nowMs);
    if (this.settled.has(settlement.id)) return { applied: false, shortfall: 0, creditBalance: this.balances.get(keyId) ?? 0 };
    this.settled.set(settlement.id, nowMs + SETTLED_ID_MS);
    const moves = this.moves.get(keyId) ?? { lastNo: nowMs * 1000, kept: [] };
    const { state, shortfall, move } = settle(this.read(keyId, nowMs), nowMs, quota, settlement, moves);
    if (move) {
      moves.lastNo += 1;
      moves.kept.push({ ...move, no: moves.lastNo });
      if (moves.kept.length > TAT_MOVES_KEPT) moves.kept.shift();
      this.moves.set(keyId, moves);
    }
    this.store(keyId, state, ban);
    if (this.usageRows) this.keepSettledUsage(keyId, nowMs, quota, settlement, shortfall);
    return { applied: true, shortfall, creditBalance: state.creditBalance };
  }

  private store(keyId: string, state: QuotaState, ban: BanPolicy): void {
    this.states.set(keyId, { state, expiresAtMs: expiresAtMs(state, ban) });
    if (state.creditBalance > 0) this.balances.set(keyId, state.creditBalance);
    else this.balances.delete(keyId);
  }

  async usage(keyId: string, quota?: Quota): Promise<QuotaOutcome> {
    const nowMs = this.now();
    return peek(this.read(keyId, nowMs), nowMs, quota?.calendar);
  }

  async unban(keyId: string): Promise<boolean> {
    const nowMs = this.now();
    const stored = this.states.get(keyId);
    if (!stored || stored.expiresAtMs <= nowMs) return false;
    const { state, wasBanned } = lift(stored.state, nowMs);
    this.states.set(keyId, { state, expiresAtMs: stored.expiresAtMs });
    return wasBanned;
  }

  async changeCredits(keyId: string, change: CreditChange): Promise<CreditResult> {
    const before = this.balances.get(keyId) ?? 0;
    const after = change.set ?? before + (change.add ?? 0);
    if (after < 0) return { before, after: before, applied: false };
    if (after > 0) this.balances.set(keyId, after);
    else this.balances.delete(keyId);
    return { before, after, applied: true };
  }

  /** As the quota script's usageAdd: the request in its hour of the quota's day. */
  private keepUsage(keyId: string, { verdict, nowMs, cost }: QuotaOutcome, quota: Quota): void {
    const periods = usagePeriodsAt(nowMs, quota.calendar);
    const admitted = verdict === 'allowed';
    this.usageRows!.add(keyId, {
      ...periods,
      hourStartMs: usageHourStartMs(periods.dayStartMs, nowMs),
      admitted: admitted ? 1 : 0,
      refused: admitted ? 0 : 1,
      units: admitted ? cost : 0,
      credits: admitted && quota.credits === 'required' ? cost : 0,
    });
  }

  /** As SETTLE_SCRIPT's usageAdd: the extra in this hour, what is given back off the reservation's. */
  private keepSettledUsage(keyId: string, nowMs: number, quota: Quota, settlement: Settlement, shortfall: number): void {
    const delta = settlement.cost - settlement.reserve;
    if (delta === 0) return;
    const at = delta > 0 ? nowMs : settlement.minuteStartMs;
    const periods = usagePeriodsAt(at, quota.calendar);
    const credits = quota.credits !== 'required' ? 0 : delta > 0 ? delta - shortfall : delta;
    this.usageRows!.add(keyId, {
      ...periods,
      hourStartMs: usageHourStartMs(periods.dayStartMs, at),
      admitted: 0,
      refused: 0,
      units: delta,
      credits,
    });
  }

  private read(keyId: string, nowMs: number): QuotaState {
    const stored = this.states.get(keyId);
    const state = stored && stored.expiresAtMs > nowMs ? stored.state : EMPTY_STATE;
    const creditBalance = this.balances.get(keyId) ?? 0;
    return state.creditBalance === creditBalance ? state : { ...state, creditBalance };
  }

  /** Drops expired states once a minute, so memory follows the active keys only. */
  private sweep(nowMs: number): void {
    if (nowMs < this.sweepAtMs) return;
    this.sweepAtMs = nowMs + MINUTE_MS;
    for (const [id, stored] of this.states) if (stored.expiresAtMs <= nowMs) this.states.delete(id);
    for (const [id, untilMs] of this.settled) if (untilMs <= nowMs) this.settled.delete(id);
    for (const id of this.moves.keys()) if (!this.states.has(id)) this.moves.delete(id);
  }
}

/** How long a settlement's id is remembered: far longer than its retries last (as Redis's markers). */
const SETTLED_ID_MS = 10 * 60_000;
