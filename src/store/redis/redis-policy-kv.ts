import type { PolicyKvStore } from '../policy-kv-store.js';
import type { RedisClient } from './connect.js';

/**
 * The policies' KV on Redis, shared by every replica: `tg:kv:<policy>:{<key>}`, one command per
 * call (so one slot per key on a Cluster: a policy's keys spread over the nodes), expiry by Redis.
 */
export class RedisPolicyKv implements PolicyKvStore {
  constructor(private readonly redis: RedisClient) {}

  async get(namespace: string, key: string): Promise<string | undefined> {
    return (await this.redis.get(redisKey(namespace, key))) ?? undefined;
  }

  async set(namespace: string, key: string, value: string, ttlSeconds: number): Promise<void> {
    await this.redis.set(redisKey(namespace, key), value, 'EX', ttlSeconds);
  }

  async add(namespace: string, key: string, value: string, ttlSeconds: number): Promise<boolean> {
    return (await this.redis.set(redisKey(namespace, key), value, 'EX', ttlSeconds, 'NX')) === 'OK';
  }

  async delete(namespace: string, key: string): Promise<void> {
    await this.redis.del(redisKey(namespace, key));
  }
}

/** Policy names hold no brace (plugins/load-policy-code.ts), so the hash tag is always the key's. */
export function redisKey(namespace: string, key: string): string {
  return `tg:kv:${namespace}:{${key}}`;
}
