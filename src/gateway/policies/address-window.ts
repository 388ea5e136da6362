import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { RedisClient } from '../../store/redis/connect.js';

export const WINDOW_SECONDS = 60;

/** Highest limit a caller may ask for (the schemas' bound): the stores themselves never refuse below it. */
const MOST_POINTS = 1_000_000;

/** One request counted in its window. */
export interface WindowCount {
  /** The count is over the limit the caller asked for. */
  limited: boolean;
  /** Requests left in the window (0 once limited). */
  remaining: number;
  /** Whole seconds (≥ 1) until the window ends. */
  resetSeconds: number;
  /** Milliseconds until the window ends. */
  msBeforeNext: number;
}

/**
 * Fixed one-minute windows per key (a client address), shared across replicas through Redis under
 * `keyPrefix`, with an in-memory insurance limiter while Redis is down (each replica then counts
 * alone). The limit is given per count rather than fixed here, so that one pair of stores serves
 * every budget a reload may set (limit-preflights.ts keys its counts by budget); the
 * failed-authentication limit (limit-failed-auth.ts) and the preflight budget are two of these,
 * with their own prefixes.
 */
export function addressWindow(
  redis: RedisClient | undefined,
  keyPrefix: string,
): (key: string, limit: number) => Promise<WindowCount | undefined> {
  const memory = new RateLimiterMemory({ points: MOST_POINTS, duration: WINDOW_SECONDS, keyPrefix });
  const limiter: RateLimiterAbstract = redis
    ? new RateLimiterRedis({
        storeClient: redis,
        points: MOST_POINTS,
        duration: WINDOW_SECONDS,
        keyPrefix,
        insuranceLimiter: memory,
      })
    : memory;

  /** One request counted against `limit`; undefined when both stores failed (the caller then lets it through). */
  return async (key, limit) => {
    let result: RateLimiterRes;
    try {
      result = await limiter.consume(key);
    } catch (err) {
      if (!(err instanceof RateLimiterRes)) return undefined;
      result = err; // over MOST_POINTS: over any limit too
    }
    const resetSeconds = Math.max(1, Math.ceil(result.msBeforeNext / 1000));
    return {
      limited: result.consumedPoints > limit,
      remaining: Math.max(0, limit - result.consumedPoints),
      resetSeconds,
      msBeforeNext: result.msBeforeNext,
    };
  };
}
