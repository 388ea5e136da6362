import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newApiKey } from '../../src/keys/format.js';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, configCopy, createKey, startGateway, type CreatedKey, type GatewayHandle } from '../helpers/stack.js';

// Redis paused (SIGSTOP), killed and restarted under a running gateway. Requests must keep being
// answered within a second, in the configured failure mode, and everything must recover alone.

let redis: TestRedis;
let upstream: EchoUpstream;
let local: GatewayHandle;
let closed: GatewayHandle;
let open: GatewayHandle;
let key: CreatedKey;

const mode = (m: string) => configCopy({ 'gateway.yaml': (t) => t.replace('onRedisFailure: local', `onRedisFailure: ${m}`) });

beforeAll(async () => {
  // Persistence on, so a SIGKILL and restart keeps the keys (as production must: see docs/operations.md).
  redis = await TestRedis.start(['--appendonly', 'yes', '--appendfsync', 'always']);
  upstream = await new EchoUpstream().start();
  const env = { REDIS_URL: redis.url, UPSTREAM_URL: upstream.url };
  [local, closed, open] = await Promise.all([
    startGateway({ ...env, TOLLGATE_CONFIG_DIR: mode('local') }),
    startGateway({ ...env, TOLLGATE_CONFIG_DIR: mode('closed') }),
    startGateway({ ...env, TOLLGATE_CONFIG_DIR: mode('open') }),
  ]);
  key = await createKey(redis, ['--plan', 'pro']);
});

afterAll(async () => {
  redis?.resume();
  await Promise.all([local, closed, open].map((g) => g?.process.stop()));
  await upstream?.stop();
  await redis?.stop();
});

/** A request that must be answered within a second, whatever Redis does. */
function get(gateway: GatewayHandle, token: string, path = '/v1/categories'): Promise<Response> {
  return fetch(`${gateway.url}${path}`, { headers: bearer(token), signal: AbortSignal.timeout(1000) });
}

async function errorCode(res: Response): Promise<string> {
  return ((await res.json()) as { code: string }).code;
}

async function metric(gateway: GatewayHandle, name: string): Promise<string> {
  const text = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
  return text.split('\n').find((line) => line.startsWith(name)) ?? '';
}

describe('Redis paused (SIGSTOP)', () => {
  it('keeps answering from the configured failure mode, then recovers by itself', async () => {
    // Warm every gateway's key cache while Redis is healthy.
    for (const g of [local, closed, open]) expect((await get(g, key.key)).status).toBe(200);

    redis.pause();
    try {
      // A silent Redis is taken for gone once nothing was answered for four command timeouts
      // (store-health.ts); until then a request that timed out is shed (503 gateway_overloaded).
      await expect
        .poll(async () => (await get(local, key.key)).headers.get('x-tollgate-degraded'), { timeout: 30_000, interval: 50 })
        .toBe('quota-local');
      // local: the known key is served, counted against this replica's share, marked degraded.
      for (let i = 0; i < 20; i++) {
        const res = await get(local, key.key);
        expect(res.status).toBe(200);
        expect(res.headers.get('x-tollgate-degraded')).toBe('quota-local');
        expect(res.headers.get('x-ratelimit-limit')).toBe('300');
      }
      // An unknown key cannot be judged: 503, never 401.
      const unknown = await get(local, newApiKey().key);
      expect(unknown.status).toBe(503);
      expect(await errorCode(unknown)).toBe('key_store_unavailable');
      // closed: quotas refuse with 503; open: admit, marked degraded.
      await expect
        .poll(async () => errorCode(await get(closed, key.key)), { timeout: 30_000, interval: 50 })
        .toBe('rate_limit_store_unavailable');
      await expect
        .poll(async () => (await get(open, key.key)).headers.get('x-tollgate-degraded'), { timeout: 30_000, interval: 50 })
        .toBe('quota-open');
      const admitted = await get(open, key.key);
      expect(admitted.status).toBe(200);

      // Still able to serve as configured: ready, and saying degraded. Every replica shares this
      // Redis, so a 503 here would take all of them out of the load balancer at once.
      const ready = await fetch(`${local.adminUrl}/readyz`, { signal: AbortSignal.timeout(2000) });
      expect(ready.status).toBe(200);
      // The upstream is shown but is not part of the status: only the gateway's own dependencies are.
      expect(await ready.json()).toMatchObject({
        status: 'degraded',
        degraded: ['redis'],
        checks: { redis: false },
        services: { default: { inRotation: 1, targets: 1 } },
      });
      // `closed` cannot serve without Redis: not ready.
      const closedReady = await fetch(`${closed.adminUrl}/readyz`, { signal: AbortSignal.timeout(2000) });
      expect(closedReady.status).toBe(503);
      expect(await closedReady.json()).toMatchObject({ status: 'not ready', checks: { redis: false } });
      expect(await metric(local, 'tollgate_degraded')).toBe('tollgate_degraded 1');
    } finally {
      redis.resume();
    }

    await expect
      .poll(async () => (await get(local, key.key)).headers.get('x-tollgate-degraded'), { timeout: 30_000, interval: 100 })
      .toBeNull();
    await expect.poll(async () => (await get(closed, key.key)).status, { timeout: 30_000, interval: 100 }).toBe(200);
    expect(await metric(local, 'tollgate_degraded')).toBe('tollgate_degraded 0');
    // Each transition is logged once, not per request (logs are written in batches: wait for it).
    await local.process.waitForLog('redis available again: normal mode');
    const transitions = local.process.logs().filter((l) => typeof l.msg === 'string' && /redis (un)?available/.test(l.msg));
    expect(transitions.map((l) => l.msg)).toEqual(['redis unavailable: degraded mode', 'redis available again: normal mode']);
  });
});

describe('Redis killed and restarted', () => {
  it('fails fast while Redis is gone and recovers when it is back, keys intact', async () => {
    expect((await get(local, key.key)).status).toBe(200);
    await redis.kill();
    // The key has called steadily through this file, so the replica may hold a lease of it (a warm
    // key's, docs/quota-leases.md): units Redis counted before it died, admitted from memory until
    // the replica sees its connections gone and ends every lease. Then, local counting.
    await expect
      .poll(
        async () => {
          const res = await get(local, key.key);
          expect(res.status).toBe(200);
          return res.headers.get('x-tollgate-degraded');
        },
        { timeout: 30_000, interval: 50 },
      )
      .toBe('quota-local');
    for (let i = 0; i < 5; i++) {
      const res = await get(local, key.key);
      expect(res.status).toBe(200);
      expect(res.headers.get('x-tollgate-degraded')).toBe('quota-local');
    }
    expect((await get(closed, key.key)).status).toBe(503);

    await redis.launch();
    await expect
      .poll(async () => (await get(local, key.key)).headers.get('x-tollgate-degraded'), { timeout: 30_000, interval: 200 })
      .toBeNull();
    // A key created after the restart works at once (the store and pub/sub are back).
    const fresh = await createKey(redis, ['--plan', 'free']);
    await expect.poll(async () => (await get(local, fresh.key)).status, { timeout: 30_000, interval: 100 }).toBe(200);
  });
});
