import type { CachePlace } from './cache-key.js';
import type { Stored } from './stored-response.js';

/**
 * Where entries live: per replica in memory, or shared in Redis. Every method may reject (a shared
 * store that is down); callers then bypass the cache, they never fail the request.
 */
export interface CacheStore {
  /** The entries at these keys, in order (one round trip for a shared store). */
  getMany(keys: readonly string[]): Promise<(Stored | undefined)[]>;
  /** Keeps `stored` at `key` until its expiresAtMs; `tag` groups the URL's keys for invalidation. */
  set(tag: string, key: string, stored: Stored): Promise<void>;
  /** Drops every entry of the URL: every scope and variant. */
  invalidate(tag: string, place: CachePlace): Promise<void>;
  /** Drops the service's entries whose path starts with `prefix` (all of them without one); how many went. */
  purge(service: string, prefix?: string): Promise<number>;
}
