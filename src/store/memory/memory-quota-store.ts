import type { BanPolicy, Quota } from '../../config/plans-schema.js';
import { decide, EMPTY_STATE, expiresAtMs, lift, peek, type QuotaOutcome, type QuotaState } from '../../quota/quota-state.js';
import { MINUTE_MS } from '../../quota/windows.js';
import type { CreditChange, CreditResult, QuotaStore, SlotClaim } from '../quota-store.js';
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

  /** Concurrency slots, taken in the same step as the windows (`consume`'s `slot`). */
  readonly slots: MemorySlotStore;

  constructor(private readonly now: () => number = Date.now) {
    this.slots = new MemorySlotStore(now);
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
    // A decision that changed nothing (a ban in force, a balance that cannot pay) stores nothing,
    // as the script writes nothing: its expiry stays the one computed when it was written.
    if (state === previous) return outcome;
    this.states.set(keyId, { state, expiresAtMs: expiresAtMs(state, ban) });
    if (state.creditBalance > 0) this.balances.set(keyId, state.creditBalance);
    else this.balances.delete(keyId);
    return outcome;
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
  }
}
