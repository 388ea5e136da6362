import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QUOTA_NOTICE_CHANNEL } from '../../src/store/redis/redis-keys.js';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { leaseConfig, leasedRequests } from '../helpers/gcra-leases.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, createKey, startGateways, type GatewayHandle } from '../helpers/stack.js';
import { awayFromDayEdge, inOneMinute } from '../helpers/windows.js';

// X-RateLimit-Remaining on a request admitted from a lease, with two real gateway processes on one
// real redis-server (docs/quota-leases.md, "Headers"): once the lease notices have reached it, a
// gateway never reports more than is truly left, however much the other one admitted since its
// grant, and under-reports by at most the units out on the other's leases.

const LIMIT = 5000;
const PLANS = `
plans:
  hotday: { perMinute: ${LIMIT}, perDay: ${LIMIT} }
ban:
  afterRejections: 1000000
  window: 60
  duration: 60
`;
// Long leases: a lease outlives the wait for its notices (it still ends at the minute's edge).
const MAX_BLOCK = 100;
const LEASES = `  leases: { enabled: true, leaseMs: 30000, hotPerSecond: 3, minBlock: 4, maxBlock: ${MAX_BLOCK}, spread: 2 }`;

let redis: TestRedis;
let upstream: EchoUpstream;
let configDir: string;
let listener: Redis;
let published = 0;
const gateways: GatewayHandle[] = [];

beforeAll(async () => {
  configDir = leaseConfig(PLANS, 2, LEASES);
  redis = await TestRedis.start();
  upstream = await new EchoUpstream().start();
  listener = redis.client();
  listener.on('message', () => published++);
  await listener.subscribe(QUOTA_NOTICE_CHANNEL);
  gateways.push(...(await startGateways(2, { redisUrl: redis.url, upstreamUrl: upstream.url, configDir })));
}, 180_000);

afterAll(async () => {
  listener?.disconnect();
  await Promise.all(gateways.map((g) => g.process.stop()));
  await upstream?.stop();
  await redis?.stop();
});

async function send(key: string, gateway: number): Promise<{ status: number; remaining: number }> {
  const res = await fetch(`${gateways[gateway]!.url}/v1/categories`, { headers: bearer(key) });
  await res.arrayBuffer();
  return { status: res.status, remaining: Number(res.headers.get('x-ratelimit-remaining')) };
}

async function noticesHeard(gateway: number): Promise<number> {
  const text = await fetch(`${gateways[gateway]!.adminUrl}/metrics`).then((r) => r.text());
  return Number(/^tollgate_quota_lease_notices_total (\d+)/m.exec(text)?.[1] ?? NaN);
}

const leasedOn = (gateway: number) => leasedRequests({ gateways: () => [gateways[gateway]!] });

describe('X-RateLimit-Remaining under leases, two gateways', { timeout: 180_000 }, () => {
  it("a leased answer never reports more than is left once the notices are in, and under-reports by at most the other gateway's lease", async () => {
    await awayFromDayEdge(60);
    await inOneMinute(async () => {
      const { key } = await createKey(redis, ['--plan', 'hotday'], configDir);
      let admitted = 0;
      const count = ({ status }: { status: number }) => (admitted += status === 200 ? 1 : 0);
      // Gateway 0 takes a lease (three requests in a second make the key hot there).
      const leasedBefore = await leasedOn(0);
      while ((await leasedOn(0)) === leasedBefore) count(await send(key, 0));
      // Gateway 1 then admits far more than gateway 0's block, on leases of its own and through Redis.
      for (let i = 0; i < 600; i++) count(await send(key, 1));
      expect(admitted).toBeLessThan(LIMIT);

      // Every notice published so far has reached gateway 0 (pub/sub: waited for, not timed).
      const deadline = Date.now() + 30_000;
      while ((await noticesHeard(0)) < published && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(await noticesHeard(0)).toBeGreaterThanOrEqual(published);

      const leasedNow = await leasedOn(0);
      const answer = await send(key, 0);
      count(answer);
      // Admitted from gateway 0's lease (not by Redis, whose answer would be exact anyway).
      expect(await leasedOn(0)).toBe(leasedNow + 1);
      const trulyLeft = LIMIT - admitted;
      expect(answer.remaining).toBeLessThanOrEqual(trulyLeft);
      // Gateway 1 holds at most one lease: less than half a block when it asks for the next, so
      // 1.5 blocks at most once that arrives (docs/quota-leases.md).
      expect(answer.remaining).toBeGreaterThanOrEqual(trulyLeft - 1.5 * MAX_BLOCK);
    });
  });
});
