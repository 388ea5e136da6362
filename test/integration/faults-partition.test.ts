import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { FaultProxy } from '../helpers/fault-proxy.js';
import { TestRedis, dayCountIn } from '../helpers/redis-server.js';
import { gatewayWaits, requestLoopsApart, sleep } from '../helpers/request-loops.js';
import { configCopy, createKey, withLeases, startGateway, type CreatedKey, type GatewayHandle } from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// A partition without FIN between a gateway and its Redis (a fault proxy of the test's own), under
// 16 keep-alive loops on one key, with the shipped config (local mode, 250 ms command timeout):
// every request is answered (200, or 503 while the outage is being confirmed), /readyz stays 200
// and says degraded, and after the heal the key's day
// count in Redis holds everything admitted. It may hold more by the requests that were in flight
// when the path broke (Redis counted them, their replies never came, and the gateway decided them
// again locally: docs/operations.md, "Failure modes"), never less.

const LOOPS = 16;
let redis: TestRedis;
let proxy: FaultProxy;
let upstream: EchoUpstream;
let gateway: GatewayHandle;
let key: CreatedKey;

beforeAll(async () => {
  redis = await TestRedis.start();
  proxy = await FaultProxy.start(redis.port);
  upstream = await new EchoUpstream().start();
  // Leases off: with them, the units out on leases when the connection breaks are counted in Redis
  // and given back only if the give-back gets through, so Redis may hold more than was admitted
  // by up to those units (docs/operations.md, "Failure modes"); this test counts the admissions
  // decided without Redis, to the request.
  const configDir = configCopy({ 'gateway.yaml': withLeases(false) });
  gateway = await startGateway({ REDIS_URL: proxy.url, UPSTREAM_URL: upstream.url, TOLLGATE_CONFIG_DIR: configDir });
  // Limits no run reaches: this test is about counting, not refusing.
  key = await createKey(redis, ['--plan', 'free', '--per-minute', '1000000', '--per-day', '10000000']);
});

afterAll(async () => {
  await gateway?.process.stop();
  await proxy?.stop();
  await upstream?.stop();
  await redis?.stop();
});

async function readyz(): Promise<{ status: number; body: { status: string; degraded?: string[] } }> {
  const res = await fetch(`${gateway.adminUrl}/readyz`, { signal: AbortSignal.timeout(30_000) });
  return { status: res.status, body: (await res.json()) as { status: string; degraded?: string[] } };
}

const dayCount = () => dayCountIn(redis, key.id);

describe('Redis partitioned from a gateway (no FIN)', () => {
  it('answers every request, stays ready (degraded), and Redis counts every admission after the heal', async () => {
    await awayFromDayEdge(120);
    const loops = requestLoopsApart([gateway.url], key.key, LOOPS);
    await sleep(1500);
    proxy.partition();
    let duringPartition: Awaited<ReturnType<typeof readyz>>;
    try {
      // Until the gateway has noticed (its first command timeout), then while it serves alone.
      await expect.poll(async () => (await readyz()).body.status, { timeout: 30_000, interval: 200 }).toBe('degraded');
      await sleep(3000);
      duringPartition = await readyz();
    } finally {
      proxy.heal();
    }
    await expect.poll(async () => (await readyz()).body.status, { timeout: 30_000, interval: 200 }).toBe('ready');
    await sleep(1500);
    const tally = await loops.stop();

    const admitted = tally.statuses.get(200) ?? 0;
    console.log(
      `partition: ${[...tally.statuses].map(([s, n]) => `${n}×${s}`).join(', ')}; degraded answers ${JSON.stringify(Object.fromEntries(tally.degraded))}; ${await gatewayWaits(gateway, tally)}`,
    );
    expect(duringPartition.status).toBe(200);
    expect(duringPartition.body).toMatchObject({ status: 'degraded', degraded: ['redis'] });
    expect(tally.unanswered).toBe(0);
    // 200, or, in the first second of the partition (before a silent Redis counts as gone: four
    // command timeouts without an answer), 503 gateway_overloaded for a request whose call timed out.
    expect([...tally.statuses.keys()].filter((status) => status !== 200 && status !== 503)).toEqual([]);
    expect(tally.degraded.get('quota-local') ?? 0).toBeGreaterThan(0);
    // The degraded admissions reach Redis once the gateway is back on it (degraded-ledger.ts).
    await expect.poll(dayCount, { timeout: 30_000, interval: 200 }).toBeGreaterThanOrEqual(admitted);
    await sleep(1500); // a second flush, were there one, would land meanwhile
    const counted = await dayCount();
    const transitions = gateway.process.logs().filter((l) => typeof l.msg === 'string' && /redis (un)?available|degraded-mode/.test(l.msg));
    console.log(
      `partition: admitted ${admitted}, Redis day count ${counted}; ${transitions.map((l) => `${String(l.msg)} ${JSON.stringify(l.units ?? '')}`).join('; ')}`,
    );
    // Each time the gateway lost Redis, at most the requests then in flight (one per loop).
    const losses = transitions.filter((l) => l.msg === 'redis unavailable: degraded mode').length;
    expect(counted).toBeGreaterThanOrEqual(admitted);
    expect(counted - admitted).toBeLessThanOrEqual(LOOPS * losses);
  }, 180_000);
});

describe('every connection to Redis reset at once (RST), and added latency', () => {
  it('answers every request and Redis counts every admission after the reconnection', async () => {
    await awayFromDayEdge(120);
    const before = await dayCount();
    const loops = requestLoopsApart([gateway.url], key.key, LOOPS);
    await sleep(1000);
    // Latency below the command timeout changes nothing but the wait.
    proxy.latency(50);
    await sleep(1000);
    proxy.latency(0);
    proxy.reset();
    await sleep(2000);
    const tally = await loops.stop();
    const admitted = tally.statuses.get(200) ?? 0;
    await expect.poll(dayCount, { timeout: 30_000, interval: 200 }).toBeGreaterThanOrEqual(before + admitted);
    await sleep(1500);
    const counted = (await dayCount()) - before;
    console.log(
      `reset: ${[...tally.statuses].map(([s, n]) => `${n}×${s}`).join(', ')}; degraded ${JSON.stringify(Object.fromEntries(tally.degraded))}; ${await gatewayWaits(gateway, tally)}; admitted ${admitted}, counted ${counted}`,
    );
    expect(tally.unanswered).toBe(0);
    expect([...tally.statuses.keys()].filter((status) => status !== 200 && status !== 503)).toEqual([]);
    // A reset loses the replies in flight: those requests may be counted by Redis and again here.
    expect(counted - admitted).toBeLessThanOrEqual(LOOPS);
  }, 180_000);
});
