import type { ChainableCommander } from 'ioredis';
import type { RedisClient } from '../store/redis/connect.js';
import type { CachePlace } from './cache-key.js';
import type { CacheStore } from './cache-store.js';
import { decodeStored, encodeStored, type Stored } from './stored-response.js';

/** The set of a URL's keys, beside them in the URL's hash tag. */
const keysOf = (tag: string) => `${tag}:keys`;
/** A service's URLs (`tag host path`), scored by when their last entry expires: read by purges. */
const urlsOf = (service: string) => `tollgate:cache-urls:{${service}}`;

/**
 * Entries shared by every replica, in Redis: binary values (encodeStored) with a TTL each, the
 * URL's keys in a set beside them (one hash tag: a Cluster deletes them in one command), and the
 * service's URLs in a sorted set for purges. Its size is bounded by TTLs, maxEntryBytes and the
 * server's own maxmemory policy (docs/cache.md).
 */
export class RedisCacheStore implements CacheStore {
  constructor(private readonly redis: RedisClient) {}

  async getMany(keys: readonly string[]): Promise<(Stored | undefined)[]> {
    if (keys.length === 0) return [];
    const values = await this.redis.mgetBuffer(...keys);
    return values.map((value) => (value ? decodeStored(value) : undefined));
  }

  async set(tag: string, key: string, stored: Stored): Promise<void> {
    const ttlMs = Math.max(1, Math.ceil(stored.expiresAtMs - Date.now()));
    const urls = urlsOf(stored.service);
    // The set of keys outlives every entry in it: NX gives a new set a TTL, GT only ever extends it.
    await Promise.all([
      execAll(
        this.redis
          .multi()
          .set(key, encodeStored(stored), 'PX', ttlMs)
          .sadd(keysOf(tag), key)
          .pexpire(keysOf(tag), ttlMs, 'NX')
          .pexpire(keysOf(tag), ttlMs, 'GT'),
      ),
      execAll(this.redis.multi().zadd(urls, 'GT', stored.expiresAtMs, `${tag} ${stored.path}`).zremrangebyscore(urls, '-inf', Date.now())),
    ]);
  }

  async invalidate(tag: string, _place: CachePlace): Promise<void> {
    const keys = await this.redis.smembers(keysOf(tag));
    await this.redis.del(keysOf(tag), ...keys);
  }

  async purge(service: string, prefix?: string): Promise<number> {
    const members = await this.redis.zrangebyscore(urlsOf(service), Date.now(), '+inf');
    let purged = 0;
    for (const member of members) {
      const space = member.indexOf(' ');
      const tag = member.slice(0, space);
      const path = member.slice(space + 1);
      if (prefix !== undefined && !path.startsWith(prefix)) continue;
      const keys = await this.redis.smembers(keysOf(tag));
      const gone = keys.length > 0 ? await this.redis.del(...keys) : 0;
      await this.redis.del(keysOf(tag));
      await this.redis.zrem(urlsOf(service), member);
      purged += gone;
    }
    return purged;
  }
}

/** A MULTI's replies, failing if any command failed (exec resolves with per-command errors). */
async function execAll(multi: ChainableCommander): Promise<void> {
  const replies = await multi.exec();
  if (!replies) throw new Error('transaction aborted');
  for (const [err] of replies) if (err) throw err;
}
