import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { delayProxy } from '../helpers/delay-proxy.js';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, configCopy, createKey, slackRedisTimeout, startGateways, type GatewayHandle } from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// With leases on (the shipped config), a hot key far from its limits is admitted without a Redis
// round trip: a gateway whose Redis is 40 ms away each way answers most of that key's requests
// from its lease, as fast as one beside Redis. Real processes; the distance is a proxy of the test's.

const PLANS = `
plans:
  roomy: { perMinute: 1000000, perDay: 100000000 }
ban:
  afterRejections: 1000000
  window: 60
  duration: 60
`;
const DELAY_MS = 40;

let redis: TestRedis;
let proxy: Awaited<ReturnType<typeof delayProxy>>;
let upstream: EchoUpstream;
let configDir: string;
let near: GatewayHandle;
let far: GatewayHandle;

beforeAll(async () => {
  configDir = configCopy({ 'plans.yaml': () => PLANS, 'gateway.yaml': slackRedisTimeout });
  redis = await TestRedis.start();
  proxy = await delayProxy(Number(new URL(redis.url).port), DELAY_MS);
  upstream = await new EchoUpstream().start();
  near = (await startGateways(1, { redisUrl: redis.url, upstreamUrl: upstream.url, configDir }))[0]!;
  far = (await startGateways(1, { redisUrl: proxy.url, upstreamUrl: upstream.url, configDir }))[0]!;
}, 180_000);

afterAll(async () => {
  await Promise.all([near, far].map((g) => g?.process.stop()));
  proxy?.close();
  await upstream?.stop();
  await redis?.stop();
});

async function leasedDecisions(gateway: GatewayHandle): Promise<number> {
  const text = await fetch(`${gateway.adminUrl}/metrics`).then((r) => r.text());
  let total = 0;
  for (const m of text.matchAll(/^tollgate_quota_decisions_total\{[^}]*source="lease"[^}]*\} (\d+)/gm)) total += Number(m[1]);
  return total;
}

/** `total` requests of `key`, 8 at a time: each one's time from sending to its answer's end. */
async function closedLoop(gateway: GatewayHandle, key: string, total: number): Promise<number[]> {
  const times: number[] = [];
  let sent = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (sent < total) {
        sent++;
        const startMs = performance.now();
        const res = await fetch(`${gateway.url}/v1/categories`, { headers: bearer(key) });
        await res.arrayBuffer();
        expect(res.status).toBe(200);
        times.push(performance.now() - startMs);
      }
    }),
  );
  return times;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

describe('a hot key with Redis 40 ms away each way', { timeout: 180_000 }, () => {
  it('is answered from a lease, without a Redis round trip on most requests', async () => {
    await awayFromDayEdge(60);
    const result: Record<string, { p50: number; leased: number }> = {};
    for (const [name, gateway] of [
      ['near', near],
      ['far', far],
    ] as const) {
      const key = await createKey(redis, ['--plan', 'roomy'], configDir);
      // Warm: the key becomes hot on the gateway and takes its first lease.
      await closedLoop(gateway, key.key, 200);
      const before = await leasedDecisions(gateway);
      const times = await closedLoop(gateway, key.key, 600);
      result[name] = { p50: median(times), leased: ((await leasedDecisions(gateway)) - before) / times.length };
    }
    console.log(`p50 near ${result.near!.p50.toFixed(1)} ms, far ${result.far!.p50.toFixed(1)} ms; leased ${JSON.stringify(result)}`);
    // Most requests are decided from the lease, with no Redis on their path at any distance ...
    expect(result.far!.leased).toBeGreaterThan(0.5);
    // ... so the median request never waited for Redis: every one that did took a round trip
    // (2 × 40 ms) at least. (A bound from the structure, not a timing of the machine.)
    expect(result.far!.p50).toBeLessThan(2 * DELAY_MS);
  });
});
