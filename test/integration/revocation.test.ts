import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, createKey, keysCli, startGateway, type GatewayHandle } from '../helpers/stack.js';

// Key records are cached in every gateway for keyCache.ttlSeconds (30 s shipped); a change must
// nevertheless reach every replica at once, pushed over Redis pub/sub.

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
  it('stops a cached key on every running gateway within one second', async () => {
    const key = await createKey(redis, ['--plan', 'free']);
    // Warm every gateway's cache with the valid record.
    expect(await statusesOf(key.key)).toEqual([200, 200, 200]);

    const revoke = await keysCli(redis, ['revoke', key.id]);
    expect(revoke.code).toBe(0);
    const revokedAt = Date.now();
    let statuses = await statusesOf(key.key);
    while (statuses.some((s) => s !== 401) && Date.now() - revokedAt < 1000) {
      await new Promise((r) => setTimeout(r, 25));
      statuses = await statusesOf(key.key);
    }
    expect(statuses).toEqual([401, 401, 401]);
  });

  it('applies a plan change on every gateway at once', async () => {
    const key = await createKey(redis, ['--plan', 'free']);
    await statusesOf(key.key);
    expect((await keysCli(redis, ['set-plan', key.id, 'business'])).code).toBe(0);
    const changedAt = Date.now();
    let plans: string[];
    do {
      plans = [];
      for (const g of gateways) {
        await fetch(`${g.url}/v1/categories`, { headers: bearer(key.key) });
        plans.push(String(upstream.seen.at(-1)!.headers['x-tollgate-plan']));
      }
    } while (plans.some((p) => p !== 'business') && Date.now() - changedAt < 1000);
    expect(plans).toEqual(['business', 'business', 'business']);
  });
});
