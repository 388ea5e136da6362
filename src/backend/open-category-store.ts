import type { Logger } from '../observability/log.js';
import { connectRedis, watchConnection, whenReady } from '../store/redis/connect.js';
import { describeRedis, topologyOf, type RedisTarget } from '../config/redis-target.js';
import type { CategoryStore } from './category-store.js';
import { MemoryCategoryStore } from './memory-category-store.js';
import { RedisCategoryStore } from './redis-category-store.js';

/** How long startup waits for Redis before serving anyway (category requests get 503 until it answers). */
const REDIS_STARTUP_WAIT_MS = 5_000;

/**
 * Redis when one is given (a URL, Cluster nodes or Sentinels), memory otherwise. An unreachable
 * Redis does not stop the backend from starting: the connection keeps retrying, category requests
 * answer 503 meanwhile, and recovery is automatic. It is never a silent fallback to memory.
 */
export async function openCategoryStore(
  redisTarget: string | RedisTarget | undefined,
  commandTimeoutMs: number,
  logger: Logger,
): Promise<CategoryStore> {
  if (topologyOf(redisTarget) === 'none') {
    logger.info('categories kept in memory (no REDIS_URL): they are lost when the backend stops');
    return new MemoryCategoryStore();
  }
  const safeUrl = describeRedis(redisTarget);
  const redis = connectRedis(redisTarget!, 'backend', commandTimeoutMs);
  watchConnection(redis, safeUrl, logger, 'category store (Redis)');
  try {
    await whenReady(redis, REDIS_STARTUP_WAIT_MS);
    logger.info({ redis: safeUrl }, 'categories kept in Redis');
  } catch (err) {
    logger.warn(
      { redis: safeUrl, err: (err as Error).message },
      'category store (Redis) not reachable at startup; serving 503 for categories until it is',
    );
  }
  return new RedisCategoryStore(redis);
}
