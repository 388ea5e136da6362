import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, createKey, startGateway, type GatewayHandle } from '../helpers/stack.js';

// Expiry is judged from the key record a replica holds, so it holds while Redis is down and the
// record is served from cache (staleSeconds): an expired key must not ride out an outage.

let redis: TestRedis;
let upstream: EchoUpstream;
let gateway: GatewayHandle;

beforeAll(async () => {
  redis = await TestRedis.start();
  upstream = await new EchoUpstream().start();
  gateway = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: upstream.url });
});

afterAll(async () => {
  await gateway?.process.stop();
  await upstream?.stop();
  await redis?.stop();
});

describe('expiry while Redis is down', () => {
  it('refuses a cached key with 401 api_key_expired once its expiresAt passes, without Redis', async () => {
    const expiresAt = new Date(Date.now() + 3000).toISOString();
    const key = await createKey(redis, ['--plan', 'free', '--expires-at', expiresAt]);
    // Validated (and cached) while Redis is up.
    expect((await fetch(`${gateway.url}/v1/categories`, { headers: bearer(key.key) })).status).toBe(200);

    await redis.kill();
    const before = await fetch(`${gateway.url}/v1/categories`, { headers: bearer(key.key) });
    expect(before.status).toBe(200); // still usable from cache, quotas in the local fallback
    expect(before.headers.get('x-tollgate-degraded')).toBe('quota-local');

    const waitMs = Date.parse(expiresAt) - Date.now();
    if (waitMs > 0) await new Promise((r) => setTimeout(r, waitMs + 50));
    const after = await fetch(`${gateway.url}/v1/categories`, { headers: bearer(key.key) });
    expect(after.status).toBe(401);
    const body = (await after.json()) as { code: string; message: string };
    expect(body.code).toBe('api_key_expired');
    expect(body.message).toContain(expiresAt.replace(/\.\d{3}Z$/, ''));
    // Back up for afterAll (TestRedis.stop() waits for an exit it already saw after kill()).
    await redis.launch();
  });
});
