// The implementation is shared with the benchmark: test/harness/redis-server.ts.
import type { Redis } from 'ioredis';
export { RedisServer as TestRedis } from '../harness/redis-server.js';

/** A key's day count in Redis (its quota hash's `dc`), read on a client of the test's own. */
export async function dayCountIn(redis: { client(): Redis }, keyId: string): Promise<number> {
  const client = redis.client();
  try {
    return Number((await client.hget(`tg:quota:{${keyId}}`, 'dc')) ?? 0);
  } finally {
    client.disconnect();
  }
}
