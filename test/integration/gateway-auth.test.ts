import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, createKey, keysCli, startGateway, type CreatedKey, type GatewayHandle } from '../helpers/stack.js';

// Bearer authentication against the Redis key store, over a real gateway process.

let redis: TestRedis;
let upstream: EchoUpstream;
let gateway: GatewayHandle;
let key: CreatedKey;

beforeAll(async () => {
  redis = await TestRedis.start();
  upstream = await new EchoUpstream().start();
  gateway = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: upstream.url });
  key = await createKey(redis, ['--plan', 'pro']);
});

afterAll(async () => {
  await gateway?.process.stop();
  await upstream?.stop();
  await redis?.stop();
});

async function expectUnauthorized(headers: Record<string, string>, code: string) {
  const seenBefore = upstream.seen.length;
  const res = await fetch(`${gateway.url}/v1/categories`, { headers });
  expect(res.status).toBe(401);
  expect(res.headers.get('www-authenticate')).toMatch(/^Bearer realm="tollgate"/);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  const body = await res.json();
  expect(body).toEqual({ code, message: expect.any(String), status: 401 });
  expect(upstream.seen.length).toBe(seenBefore);
  return res;
}

describe('authentication', () => {
  it('answers a request without Authorization with 401 missing_api_key', async () => {
    await expectUnauthorized({}, 'missing_api_key');
  });

  it.each([
    ['Basic scheme', 'Basic dXNlcjpwYXNz'],
    ['Bearer without token', 'Bearer '],
    ['not a tollgate key', 'Bearer sk_live_abcdef'],
    ['two tokens', 'Bearer a b'],
    ['absurdly long token', `Bearer tg_${'x'.repeat(10_000)}`],
  ])('answers a malformed Authorization header (%s) with 401 malformed_api_key', async (_name, value) => {
    await expectUnauthorized({ authorization: value }, 'malformed_api_key');
  });

  it('refuses a mistyped key by its checksum as malformed, without a store lookup', async () => {
    const typo = key.key.slice(0, -1) + (key.key.endsWith('a') ? 'b' : 'a');
    await expectUnauthorized(bearer(typo), 'malformed_api_key');
  });

  it('answers a well-formed but unknown key with 401 invalid_api_key', async () => {
    const other = await createKey(redis, ['--plan', 'free']);
    // Same id and checksum rules, but a secret that was never issued for that id:
    const forged = await import('../../src/keys/format.js').then((m) => m.newApiKey(other.id).key);
    await expectUnauthorized(bearer(forged), 'invalid_api_key');
    const { newApiKey } = await import('../../src/keys/format.js');
    await expectUnauthorized(bearer(newApiKey().key), 'invalid_api_key');
  });

  it('accepts the Bearer scheme in any letter case and proxies the request', async () => {
    for (const scheme of ['Bearer', 'bearer', 'BEARER', 'bEaReR']) {
      const res = await fetch(`${gateway.url}/v1/categories`, { headers: { authorization: `${scheme} ${key.key}` } });
      expect(res.status).toBe(200);
      const echoed = await res.json();
      expect(echoed.url).toBe('/v1/categories');
    }
  });

  it('answers a revoked key with 401 revoked_api_key', async () => {
    const doomed = await createKey(redis, ['--plan', 'free']);
    expect((await fetch(`${gateway.url}/v1/x`, { headers: bearer(doomed.key) })).status).toBe(200);
    expect((await keysCli(redis, ['revoke', doomed.id])).code).toBe(0);
    await expectUnauthorized(bearer(doomed.key), 'revoked_api_key');
  });

  it('gives every response an X-Request-Id, keeping a well-formed one from the client', async () => {
    const generated = await fetch(`${gateway.url}/v1/categories`);
    expect(generated.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const kept = await fetch(`${gateway.url}/v1/categories`, { headers: { ...bearer(key.key), 'x-request-id': 'trace-1234-abcd' } });
    expect(kept.headers.get('x-request-id')).toBe('trace-1234-abcd');
    expect(upstream.seen.at(-1)!.headers['x-request-id']).toBe('trace-1234-abcd');
    const replaced = await fetch(`${gateway.url}/v1/categories`, { headers: { 'x-request-id': 'bad id with spaces' } });
    expect(replaced.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('logs one access line per request with key id, plan, status and latency, and never the key', async () => {
    const res = await fetch(`${gateway.url}/v1/categories?token=abc`, {
      headers: { ...bearer(key.key), 'x-request-id': 'log-check-0001' },
    });
    expect(res.status).toBe(200);
    const line = await gateway.process.waitForLog('request', 60_000, (l) => l.reqId === 'log-check-0001');
    expect(line).toMatchObject({ keyId: key.id, plan: 'pro', status: 200, method: 'GET', path: '/v1/categories' });
    expect(typeof line.ms).toBe('number');
    expect(gateway.process.output()).not.toContain(key.key);
    expect(gateway.process.output()).not.toContain(key.key.slice(16));
  });
});

describe('metrics', () => {
  it('count requests by route template and status, auth failures by code, and never name a key', async () => {
    await fetch(`${gateway.url}/v1/pets/42`, { headers: bearer(key.key) });
    await fetch(`${gateway.url}/v1/categories`);
    const res = await fetch(`${gateway.adminUrl}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await res.text();
    expect(text).toMatch(/tollgate_requests_total\{route="\/v1\/pets\/\{petId\}",method="GET",status="200"\} \d+/);
    expect(text).toMatch(/tollgate_auth_failures_total\{code="missing_api_key"\} \d+/);
    expect(text).toMatch(/tollgate_quota_decisions_total\{plan="pro",decision="allowed",source="store"\} \d+/);
    expect(text).toMatch(/tollgate_redis_duration_seconds_bucket\{le="[^"]+",operation="quota"\} \d+/);
    expect(text).toContain('tollgate_degraded 0');
    expect(text).not.toContain(key.id);
    expect(text).not.toContain(key.key);
  });
});
