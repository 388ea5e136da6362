import { LRUCache } from 'lru-cache';
import type { BanPolicy, Quota } from '../config/plans-schema.js';
import type { QuotaOutcome } from '../quota/quota-state.js';

interface LocalVerdict {
  outcome: QuotaOutcome;
  quota: Quota;
  ban: BanPolicy;
  /** Local clock when the store decided; the store's clock may differ, so only deltas are used. */
  decidedAtMs: number;
  /** Rejections answered locally and not yet counted in the store (they count towards a ban). */
  pendingRejections: number;
}

/**
 * Keys that are banned or over their limit are answered from memory until the ban or window ends:
 * hammering clients cost no Redis round trip. Counters only grow within a window, so a refusal
 * stays true until its reset unless limits change: key changes (pub/sub), unbans and plan reloads
 * clear entries. Rejections answered here are reported to the store in batches, off the request
 * path, so bans still trigger.
 */
export class LocalVerdicts {
  private readonly entries: LRUCache<string, LocalVerdict>;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly report: (keyId: string, rejections: number, quota: Quota, ban: BanPolicy) => Promise<QuotaOutcome>,
    maxEntries: number,
    flushIntervalMs = 100,
    private readonly now: () => number = Date.now,
  ) {
    this.entries = new LRUCache({ max: maxEntries, ttlAutopurge: false });
    this.timer = setInterval(() => this.flush(), flushIntervalMs);
    this.timer.unref();
  }

  /** Remembers a refusal until the moment a request could succeed again. */
  remember(keyId: string, outcome: QuotaOutcome, quota: Quota, ban: BanPolicy, untilStoreMs: number): void {
    const ttl = untilStoreMs - outcome.nowMs;
    if (ttl <= 0) return;
    this.entries.set(keyId, { outcome, quota, ban, decidedAtMs: this.now(), pendingRejections: 0 }, { ttl });
  }

  /** The cached refusal for this key, as of now (store clock advanced by the local delta), or undefined. */
  answer(keyId: string, quota: Quota): QuotaOutcome | undefined {
    const entry = this.entries.get(keyId);
    if (!entry) return undefined;
    if (entry.quota.perMinute !== quota.perMinute || entry.quota.perDay !== quota.perDay) {
      this.entries.delete(keyId);
      return undefined;
    }
    if (entry.outcome.verdict === 'limited') entry.pendingRejections++;
    return { ...entry.outcome, nowMs: entry.outcome.nowMs + (this.now() - entry.decidedAtMs) };
  }

  forget(keyId: string | null): void {
    if (keyId === null) this.entries.clear();
    else this.entries.delete(keyId);
  }

  private flush(): void {
    for (const [keyId, entry] of this.entries.entries()) {
      if (entry.pendingRejections === 0) continue;
      const rejections = entry.pendingRejections;
      entry.pendingRejections = 0;
      this.report(keyId, rejections, entry.quota, entry.ban).then(
        (outcome) => {
          if (outcome.verdict === 'banned') this.remember(keyId, outcome, entry.quota, entry.ban, outcome.bannedUntilMs);
        },
        () => {
          entry.pendingRejections += rejections; // store unreachable: try again next flush
        },
      );
    }
  }

  close(): void {
    clearInterval(this.timer);
  }
}
