import { LRUCache } from 'lru-cache';
import type { QuotaOutcome } from '../quota/quota-state.js';

interface LocalVerdict {
  outcome: QuotaOutcome;
  /** Local clock when the store decided; the store's clock may differ, so only deltas are used. */
  decidedAtMs: number;
}

/**
 * Banned keys are answered from memory until the ban ends: a banned client that keeps hammering
 * costs no Redis round trip. A ban stays true until its end unless lifted, and an unban is pushed
 * to every replica (pub/sub, then `forget`).
 *
 * Refusals short of a ban (`limited`) are deliberately not answered here: each one must be counted
 * in Redis when it happens, or a replica could not know that a refusal is the `afterRejections`-th
 * across all replicas, and bans would start late (README, "Bans"). That costs at most
 * `afterRejections` round trips per key and ban window, whatever the request rate: after that the
 * key is banned and answered here.
 */
export class LocalVerdicts {
  private readonly entries: LRUCache<string, LocalVerdict>;

  constructor(
    maxEntries: number,
    private readonly now: () => number = Date.now,
  ) {
    this.entries = new LRUCache({ max: maxEntries, ttlAutopurge: false });
  }

  /** Remembers a ban until it ends (store clock); other verdicts are not remembered. */
  remember(subject: string, outcome: QuotaOutcome): void {
    if (outcome.verdict !== 'banned') return;
    const ttl = outcome.bannedUntilMs - outcome.nowMs;
    if (ttl <= 0) return;
    this.entries.set(subject, { outcome, decidedAtMs: this.now() }, { ttl });
  }

  /** The cached ban of this key (or owner: quota-subject.ts), as of now (store clock advanced by the local delta), or undefined. */
  answer(subject: string): QuotaOutcome | undefined {
    const entry = this.entries.get(subject);
    if (!entry) return undefined;
    return { ...entry.outcome, nowMs: entry.outcome.nowMs + (this.now() - entry.decidedAtMs) };
  }

  /** An announced change of a key id, or of an owner's shared state (`owner:<name>`, on unban). */
  forget(subject: string | null): void {
    if (subject === null) this.entries.clear();
    else this.entries.delete(subject);
  }
}
