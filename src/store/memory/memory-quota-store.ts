import type { BanPolicy, Quota } from '../../config/plans-schema.js';
import { decide, EMPTY_STATE, peek, type QuotaOutcome, type QuotaState } from '../../quota/quota-state.js';
import { DAY_MS } from '../../quota/windows.js';
import type { QuotaStore } from '../quota-store.js';

/**
 * Quotas of one process in memory: the embedded store, and each replica's local limiter while
 * Redis is unreachable. The clock is injected so tests can cross window edges without waiting.
 */
export class MemoryQuotaStore implements QuotaStore {
  private readonly states = new Map<string, QuotaState>();
  private sweepAtMs = 0;

  constructor(private readonly now: () => number = Date.now) {}

  async consume(keyId: string, quota: Quota, ban: BanPolicy): Promise<QuotaOutcome> {
    return this.apply(keyId, quota, ban, 1, 0);
  }

  async reportRejections(keyId: string, rejections: number, quota: Quota, ban: BanPolicy): Promise<QuotaOutcome> {
    return this.apply(keyId, quota, ban, 0, rejections);
  }

  async usage(keyId: string): Promise<QuotaOutcome> {
    return peek(this.states.get(keyId) ?? EMPTY_STATE, this.now());
  }

  async unban(keyId: string): Promise<boolean> {
    const state = this.states.get(keyId);
    if (!state || state.bannedUntilMs <= this.now()) return false;
    this.states.set(keyId, { ...state, bannedUntilMs: 0, rejections: 0, rejectionsStartMs: 0 });
    return true;
  }

  private apply(keyId: string, quota: Quota, ban: BanPolicy, cost: number, rejections: number): QuotaOutcome {
    const nowMs = this.now();
    this.sweep(nowMs);
    const { state, outcome } = decide(this.states.get(keyId) ?? EMPTY_STATE, nowMs, quota, ban, cost, rejections);
    this.states.set(keyId, state);
    return outcome;
  }

  /** Drops keys idle since before today and not banned, so memory follows the active keys only. */
  private sweep(nowMs: number): void {
    if (nowMs < this.sweepAtMs) return;
    this.sweepAtMs = nowMs + MINUTE_MS_SWEEP;
    for (const [id, state] of this.states) {
      if (state.dayStartMs + DAY_MS <= nowMs && state.bannedUntilMs <= nowMs) this.states.delete(id);
    }
  }
}

const MINUTE_MS_SWEEP = 60_000;
