import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newApiKey } from '../../src/keys/format.js';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, configCopy, createKey, getFrom, keysCli, startGateway, type GatewayHandle } from '../helpers/stack.js';

// The failed-authentication limit throttles keys that do not authenticate, never a valid one: one
// scanner behind a shared NAT must not lock its neighbours out (regression: a blocked address got
// 429 too_many_unauthenticated_requests for every key it sent, valid or not).

let redis: TestRedis;
let upstream: EchoUpstream;
let gateway: GatewayHandle;
const address = '127.0.0.23';

beforeAll(async () => {
  redis = await TestRedis.start();
  upstream = await new EchoUpstream().start();
  const config = configCopy({ 'gateway.yaml': (t) => t.replace(/(unauthenticated:\s*\n\s*perMinute:) 60/, '$1 5') });
  gateway = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: upstream.url, TOLLGATE_CONFIG_DIR: config });
});

afterAll(async () => {
  await gateway?.process.stop();
  await upstream?.stop();
  await redis?.stop();
});

describe('failed-authentication limit (shared NAT)', () => {
  it('still serves a valid key from an address over its limit, and keeps refusing unknown and revoked keys there', async () => {
    const url = `${gateway.url}/v1/categories`;
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++) statuses.push((await getFrom(address, url, bearer(newApiKey().key))).status);
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429, 429]);

    // A key this gateway has never seen (so not in its cache) still authenticates from that address.
    const neighbour = await createKey(redis, ['--plan', 'pro']);
    const served = await getFrom(address, url, bearer(neighbour.key));
    expect(served.status).toBe(200);
    expect(served.headers['x-ratelimit-limit']).toBe('300');

    const unknown = await getFrom(address, url, bearer(newApiKey().key));
    expect(unknown.status).toBe(429);
    expect(JSON.parse(unknown.body).code).toBe('too_many_unauthenticated_requests');
    const revoked = await createKey(redis, ['--plan', 'pro']);
    expect((await keysCli(redis, ['revoke', revoked.id])).code).toBe(0);
    expect((await getFrom(address, url, bearer(revoked.key))).status).toBe(429);
  });
});
