import { z } from 'zod';

// Schema of a service's `cache` section in gateway.yaml (docs/cache.md). Absent: the service's
// responses are never stored. The semantics (what is stored, for how long, when it is
// revalidated) are RFC 9111's, read from the upstream's own fields; these options only bound
// them and choose where entries live.

export const cacheSchema = z.strictObject({
  /** The most any entry lives; the upstream's Cache-Control may shorten it (and stands in when it gives no lifetime). */
  ttlSeconds: z.number().int().min(1).max(86_400),
  /** memory: per replica, bounded by maxBytes; redis: shared by every replica (falls back to no caching without REDIS_URL). */
  store: z.enum(['memory', 'redis']).default('memory'),
  /** Bound of the memory store, entries evicted least recently used first. */
  maxBytes: z
    .number()
    .int()
    .min(1024)
    .max(2 ** 40)
    .default(64 * 1024 * 1024),
  /** A response larger than this streams through unstored. */
  maxEntryBytes: z
    .number()
    .int()
    .min(1)
    .max(512 * 1024 * 1024)
    .default(1024 * 1024),
  /** RFC 5861: how long past its lifetime an entry may answer when the upstream fails (502/503/504, 500, unreachable); 0: never. */
  staleIfErrorSeconds: z.number().int().min(0).max(86_400).default(0),
  /**
   * A response the upstream did not mark `public` (nor gave `s-maxage`) was made for the consumer it
   * saw in the assertion: `per-consumer` stores it for that consumer only, `none` never stores it.
   */
  privateResponses: z.enum(['per-consumer', 'none']).default('per-consumer'),
  /** Honour a client's `Cache-Control: no-cache` / `max-age=0` (a forced revalidation); off, no client can bust the cache. */
  honourRequestNoCache: z.boolean().default(false),
});

export type CacheConfig = z.infer<typeof cacheSchema>;
