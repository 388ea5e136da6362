import type { Redis } from 'ioredis';
import { hashApiKey, newApiKey } from '../src/keys/format.js';
import { KEY_INDEX, keyRecordKey } from '../src/store/redis/redis-keys.js';
import { runCliOrThrow } from './processes.js';

/** Creates a key through the real CLI (`tollgate keys create … --json`) and returns the secret. */
export async function createKeyWithCli(redisUrl: string, args: string[]): Promise<{ id: string; key: string }> {
  const out = await runCliOrThrow(['keys', 'create', ...args, '--json'], { REDIS_URL: redisUrl });
  const created = JSON.parse(out) as { id: string; key: string };
  return { id: created.id, key: created.key };
}

/**
 * Writes `count` valid key records straight into Redis, pipelined (the CLI would take a process
 * per key): the same hash fields `tollgate keys create` writes (RedisKeyStore.create), and the
 * index. Returns the secrets, which the load then sends.
 */
export async function createKeysInBulk(redis: Redis, count: number, plan: string, batch = 5000): Promise<string[]> {
  const keys: string[] = new Array(count);
  const createdAt = new Date().toISOString();
  for (let start = 0; start < count; start += batch) {
    const pipeline = redis.pipeline();
    const end = Math.min(count, start + batch);
    const ids: string[] = [];
    for (let i = start; i < end; i++) {
      const { id, key } = newApiKey();
      keys[i] = key;
      ids.push(id);
      pipeline.hset(keyRecordKey(id), {
        id,
        hash: hashApiKey(key),
        name: `bench-${i}`,
        plan,
        status: 'active',
        createdAt,
        perMinute: '100000000',
        perDay: '1000000000',
      });
    }
    pipeline.sadd(KEY_INDEX, ...ids);
    const replies = await pipeline.exec();
    const failed = replies?.find(([err]) => err);
    if (failed) throw failed[0];
  }
  return keys;
}
