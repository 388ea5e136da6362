import type { BanPolicy, Quota } from '../config/plans-schema.js';
import type { QuotaOutcome } from '../quota/quota-state.js';

/**
 * Counters, rejections and bans of every key: Redis shared by all replicas, or memory. Both apply
 * the rules of src/quota/quota-state.ts; a store only keeps the state.
 */
export interface QuotaStore {
  /**
   * One atomic decision for one request of `cost` units: ban check, both windows, rejection counting.
   * `batched`, when given, hears how many requests the store decided in the same call (Redis: one
   * key's requests of one event-loop turn; a trace attribute); the memory store never calls it.
   */
  consume(keyId: string, quota: Quota, ban: BanPolicy, cost?: number, batched?: (requests: number) => void): Promise<QuotaOutcome>;
  /** Current use without consuming anything. */
  usage(keyId: string): Promise<QuotaOutcome>;
  /** Lifts a ban and forgets counted rejections; false if the key was not banned. */
  unban(keyId: string): Promise<boolean>;
}
