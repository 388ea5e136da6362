// The implementation is shared with the benchmark: test/harness/redis-server.ts.
import type { Redis } from 'ioredis';
import { RedisServer } from '../harness/redis-server.js';
import { pollUntil } from './poll.js';
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

/** A redis-server of the test's own replicating `master`, once its link to it is up. */
export async function replicaOf(master: { port: number }): Promise<RedisServer> {
  const replica = await RedisServer.start(['--replicaof', '127.0.0.1', String(master.port)]);
  const client = replica.client();
  try {
    await pollUntil(
      () => client.info('replication'),
      (info) => info.includes('master_link_status:up'),
      { deadline: Date.now() + 30_000 },
    );
  } finally {
    client.disconnect();
  }
  return replica;
}
