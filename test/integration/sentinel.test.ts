import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { TestRedisSentinel } from '../helpers/redis-sentinel.js';
import { bearer, createKey, keysCli, startGateway, type GatewayHandle } from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// REDIS_SENTINELS: the gateway and the CLI find the master through Sentinel, and follow a failover.
// The counts are read in the day window: a failover takes seconds, and a minute edge inside it
// would reset a minute count (this test used to fail whenever one did).

let redis: TestRedisSentinel;
let upstream: EchoUpstream;
let gateway: GatewayHandle;

beforeAll(async () => {
  redis = await TestRedisSentinel.start();
  upstream = await new EchoUpstream().start();
  gateway = await startGateway({ ...redis.env, UPSTREAM_URL: upstream.url });
});

afterAll(async () => {
  await gateway?.process.stop();
  await upstream?.stop();
  await redis?.stop();
});

describe('Redis through Sentinel', () => {
  it('serves keys created with the CLI, and counts in the master', async () => {
    await awayFromDayEdge();
    const key = await createKey(redis, ['--plan', 'free']);
    const res = await fetch(`${gateway.url}/v1/categories`, { headers: bearer(key.key) });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-tollgate-degraded')).toBeNull();
    const usage = JSON.parse((await keysCli(redis, ['usage', key.id, '--json'])).stdout) as { day: { used: number } };
    expect(usage.day.used).toBe(1);
  });

  it('follows a failover to the promoted replica', async () => {
    await awayFromDayEdge();
    const key = await createKey(redis, ['--plan', 'pro']);
    expect((await fetch(`${gateway.url}/v1/categories`, { headers: bearer(key.key) })).status).toBe(200);
    // Replication is asynchronous: let the replica have that count before promoting it.
    const replica = redis.replica.client();
    while (Number(await replica.hget(`tg:quota:{${key.id}}`, 'dc')) !== 1) await new Promise((r) => setTimeout(r, 20));
    replica.disconnect();
    await redis.failover();
    // The gateway reconnects to the promoted replica (Sentinel announces +switch-master; writes on
    // the demoted master answer READONLY).
    const promoted = redis.replica.client();
    const deadline = Date.now() + 10_000;
    while (!String(await promoted.call('CLIENT', 'LIST')).includes('name=tollgate-gateway') && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(String(await promoted.call('CLIENT', 'LIST'))).toContain('name=tollgate-gateway');
    const countBefore = Number(await promoted.hget(`tg:quota:{${key.id}}`, 'dc'));
    promoted.disconnect();

    // A command that failed during the switch opened the store breaker; it closes at its next
    // successful probe (at most every 0.5 s). Until then answers are degraded and counted in this
    // replica's memory, and added to Redis once it is back (degraded-ledger.ts): the Redis count
    // moves by every request admitted, once (one more at most: a request in flight when the old
    // master went away may have been counted there and decided again here).
    let admitted = 0;
    let res = await fetch(`${gateway.url}/v1/categories`, { headers: bearer(key.key) });
    if (res.status === 200) admitted++;
    for (let i = 0; i < 50 && res.headers.get('x-tollgate-degraded') !== null; i++) {
      await new Promise((r) => setTimeout(r, 100));
      res = await fetch(`${gateway.url}/v1/categories`, { headers: bearer(key.key) });
      if (res.status === 200) admitted++;
    }
    expect(res.status).toBe(200);
    expect(res.headers.get('x-tollgate-degraded')).toBeNull();
    const used = async () => {
      const usage = await keysCli(redis, ['usage', key.id, '--json']);
      expect(usage.code, usage.stderr).toBe(0);
      return (JSON.parse(usage.stdout) as { day: { used: number } }).day.used;
    };
    await expect.poll(used, { timeout: 30_000, interval: 200 }).toBeGreaterThanOrEqual(countBefore + admitted);
    expect(await used()).toBeLessThanOrEqual(countBefore + admitted + 1);
    expect(await redis.masterPort()).toBe(redis.replica.port);
  });
});
