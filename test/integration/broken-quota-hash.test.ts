import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, configCopy, createKey, slackRedisTimeout, startGateways, type GatewayHandle } from '../helpers/stack.js';

// A key whose quota hash holds another type (`SET tg:quota:{id} x` by hand): Redis answers its
// quota step with WRONGTYPE. That is Redis up and answering, about one key's data: the key's
// requests get a clear 500 Error body, and every other key goes on being decided by Redis, not by
// the degraded mode's local counting (x-tollgate-degraded) meant for a Redis that is gone.

let redis: TestRedis;
let upstream: EchoUpstream;
let gateway: GatewayHandle;
let configDir: string;

beforeAll(async () => {
  [redis, upstream] = await Promise.all([TestRedis.start(), new EchoUpstream().start()]);
  configDir = configCopy({ 'gateway.yaml': slackRedisTimeout });
  gateway = (await startGateways(1, { redisUrl: redis.url, upstreamUrl: upstream.url, configDir }))[0]!;
}, 200_000);

afterAll(async () => {
  await gateway?.process.stop();
  await upstream?.stop();
  await redis?.stop();
});

describe('a key whose quota hash holds another type', () => {
  it('is answered 500 with an Error body, and the other keys stay decided by Redis', async () => {
    const [broken, healthy] = await Promise.all([
      createKey(redis, ['--plan', 'pro'], configDir),
      createKey(redis, ['--plan', 'pro'], configDir),
    ]);
    const client = redis.client();
    await client.set(`tg:quota:{${broken.id}}`, 'x');
    const get = (key: string) => fetch(`${gateway.url}/v1/plan`, { headers: bearer(key) });
    // Both in one turn of the gateway where they can be (one packed call), then one after the other.
    for (const answers of [await Promise.all([get(broken.key), get(healthy.key)]), [await get(broken.key), await get(healthy.key)]]) {
      const [bad, good] = answers;
      expect(bad!.status).toBe(500);
      expect(await bad!.json()).toMatchObject({ status: 500, code: 'internal_error' });
      expect(good!.status).toBe(200);
      expect(good!.headers.get('x-tollgate-degraded')).toBeNull();
      await good!.arrayBuffer();
    }
    // Redis counted both of the healthy key's requests (none was counted locally instead).
    expect((await new RedisQuotaStore(client).usage(healthy.id, { perMinute: 300, perDay: 10000 })).dayCount).toBe(2);
    client.disconnect();
  }, 60_000);
});
