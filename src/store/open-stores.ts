import type { Logger } from '../observability/log.js';
import type { KeyStore } from './key-store.js';
import { MemoryKeyStore } from './memory/memory-key-store.js';
import { MemoryQuotaStore } from './memory/memory-quota-store.js';
import type { QuotaStore } from './quota-store.js';
import { RedisQuotaStore } from './redis/redis-quota-store.js';
import { connectRedis, watchConnection, whenReady, type RedisClient } from './redis/connect.js';
import { describeRedis, topologyOf, type RedisTarget } from '../config/redis-target.js';
import { RedisKeyStore } from './redis/redis-key-store.js';

const STARTUP_WAIT_MS = 5000;

export interface Stores {
  keys: KeyStore;
  quotas: QuotaStore;
  /** The shared Redis client, absent on the embedded store. */
  redis?: RedisClient;
  close(): Promise<void>;
}

/**
 * Redis when one is configured (a URL, Cluster nodes or Sentinels), the embedded in-memory store otherwise. A configured Redis that
 * is down is never silently replaced by memory: requests get 503 until it is back.
 */
export async function openStores(target: string | RedisTarget, commandTimeoutMs: number, logger: Logger): Promise<Stores> {
  if (topologyOf(target) === 'none') {
    logger.warn('no REDIS_URL: using the embedded in-memory store (one process only, nothing persisted)');
    return { keys: new MemoryKeyStore(), quotas: new MemoryQuotaStore(), close: async () => {} };
  }
  const redis = connectRedis(target, 'gateway', commandTimeoutMs);
  watchConnection(redis, describeRedis(target), logger, 'redis');
  // Serve only once Redis answers, or after a bounded wait (then 503s until it does; never memory).
  await whenReady(redis, STARTUP_WAIT_MS).catch(() => {});
  const keys = new RedisKeyStore(redis);
  return {
    keys,
    quotas: new RedisQuotaStore(redis),
    redis,
    async close() {
      await keys.close();
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}
