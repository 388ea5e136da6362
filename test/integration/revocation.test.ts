import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { TestRedis } from '../helpers/redis-server.js';
import { beforeKeyCacheExpiry, pollUntil } from '../helpers/poll.js';
import { bearer, createKey, keysCli, startGateway, type GatewayHandle } from '../helpers/stack.js';

// Key records are cached in every gateway for keyCache.ttlSeconds (30 s shipped); a change must
// nevertheless reach every replica at once, pushed over Redis pub/sub. The tests poll for the change
// until just before the cached records could have expired on their own: seeing it by then proves
// the push, and a loaded machine that delivers it late makes the test slower, not red.

let redis: TestRedis;
let upstream: EchoUpstream;
let gateways: GatewayHandle[];

beforeAll(async () => {
  redis = await TestRedis.start();
  upstream = await new EchoUpstream().start();
  gateways = await Promise.all([1, 2, 3].map(() => startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: upstream.url })));
});

afterAll(async () => {
  await Promise.all(gateways?.map((g) => g.process.stop()) ?? []);
  await upstream?.stop();
  await redis?.stop();
});

async function statusesOf(key: string): Promise<number[]> {
  return Promise.all(gateways.map((g) => fetch(`${g.url}/v1/categories`, { headers: bearer(key) }).then((r) => r.status)));
}

describe('revocation', () => {
  it('stops a cached key on every running gateway before its cached record expires (pushed)', async () => {
    const key = await createKey(redis, ['--plan', 'free']);
    // Warm every gateway's cache with the valid record.
    const cachedSince = Date.now();
    expect(await statusesOf(key.key)).toEqual([200, 200, 200]);

    const revoke = await keysCli(redis, ['revoke', key.id]);
    expect(revoke.code).toBe(0);
    const statuses = await pollUntil(
      () => statusesOf(key.key),
      (s) => s.every((status) => status === 401),
      { deadline: beforeKeyCacheExpiry(cachedSince) },
    );
    expect(statuses).toEqual([401, 401, 401]);
  });

  it('applies a plan change on every gateway at once', async () => {
    const key = await createKey(redis, ['--plan', 'free']);
    const cachedSince = Date.now();
    await statusesOf(key.key);
    expect((await keysCli(redis, ['set-plan', key.id, 'business'])).code).toBe(0);
    const plansSeen = async () => {
      const plans: string[] = [];
      for (const g of gateways) {
        await fetch(`${g.url}/v1/categories`, { headers: bearer(key.key) });
        plans.push(String(upstream.seen.at(-1)!.headers['x-tollgate-plan']));
      }
      return plans;
    };
    const plans = await pollUntil(plansSeen, (p) => p.every((plan) => plan === 'business'), {
      deadline: beforeKeyCacheExpiry(cachedSince),
    });
    expect(plans).toEqual(['business', 'business', 'business']);
  });
});
