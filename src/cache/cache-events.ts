import type { RedisClient } from '../store/redis/connect.js';
import { subscriptionsOf } from '../store/redis/subscriptions.js';
import type { CachePlace } from './cache-key.js';

const CHANNEL = 'tollgate:cache:events';

/** What every replica must forget: one URL (an unsafe request succeeded on it), or a service's entries under a prefix (a purge). */
export type CacheEvent = { op: 'invalidate'; place: CachePlace } | { op: 'purge'; service: string; prefix?: string };

/**
 * Tells every replica what to forget, over Redis pub/sub (the memory stores are per replica; the
 * Redis store is shared, and forgets once, where the change happened). A replica whose
 * subscription lapsed may have missed events: it forgets everything it holds then (`gap`).
 */
export class CacheEvents {
  private stopListening?: () => void;

  constructor(private readonly redis: RedisClient | undefined) {}

  /** Publishes; a Redis that is down loses it (entries then live out their short lifetimes). */
  publish(event: CacheEvent): void {
    this.redis?.publish(CHANNEL, JSON.stringify(event)).catch(() => {});
  }

  listen(apply: (event: CacheEvent) => void, gap: () => void): void {
    if (!this.redis || this.stopListening) return;
    this.stopListening = subscriptionsOf(this.redis).listen(CHANNEL, {
      message: (message) => {
        try {
          apply(JSON.parse(message) as CacheEvent);
        } catch {
          // Not ours: ignored.
        }
      },
      // Also once the subscription takes effect: anything stored before it may have missed events.
      gap,
    }).stop;
  }

  close(): void {
    this.stopListening?.();
    this.stopListening = undefined;
  }
}
