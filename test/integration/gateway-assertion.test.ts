import { decodeProtectedHeader, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gatewayIdentity, kidOf, TEST_ASSERTION_SECRET } from '../helpers/assertion.js';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { runCli, TollgateProcess } from '../helpers/processes.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, createKey, startBackend, startGateway, type CreatedKey } from '../helpers/stack.js';

// How the backend trusts the gateway: a short-lived HS256 assertion in X-Tollgate-Assertion,
// signed by the gateway and verified by the backend, over real processes.

const NEW_SECRET = 'the-next-assertion-secret-after-rotation-0123456789';
const secretKey = (secret: string) => new TextEncoder().encode(secret);

let redis: TestRedis;
let key: CreatedKey;
let other: CreatedKey;
const stoppers: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  redis = await TestRedis.start();
  key = await createKey(redis, ['--plan', 'business']);
  other = await createKey(redis, ['--plan', 'free']);
});

afterAll(async () => {
  for (const stop of stoppers.reverse()) await stop();
  await redis?.stop();
});

async function backendWith(env: Record<string, string | undefined>) {
  const backend = await startBackend({ REDIS_URL: redis.url, ...env });
  stoppers.push(() => backend.process.stop());
  return backend;
}
async function gatewayWith(upstreamUrl: string, env: Record<string, string | undefined> = {}) {
  const gateway = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: upstreamUrl, ...env });
  stoppers.push(() => gateway.process.stop());
  return gateway;
}

describe('what the gateway sends upstream', () => {
  let upstream: EchoUpstream;
  let gatewayUrl: string;

  beforeAll(async () => {
    upstream = await new EchoUpstream().start();
    stoppers.push(() => upstream.stop());
    gatewayUrl = (await gatewayWith(upstream.url)).url;
  });

  it('a JWT naming the consumer, its plan, issuer, audience and a 60-second lifetime', async () => {
    await fetch(`${gatewayUrl}/v1/categories`, { headers: bearer(key.key) });
    const headers = upstream.seen.at(-1)!.headers;
    const token = String(headers['x-tollgate-assertion']);
    expect(decodeProtectedHeader(token)).toEqual({ alg: 'HS256', typ: 'JWT', kid: kidOf(TEST_ASSERTION_SECRET) });
    const { payload } = await jwtVerify(token, secretKey(TEST_ASSERTION_SECRET), { issuer: 'tollgate', audience: 'tollgate-backend' });
    expect(payload).toMatchObject({ sub: key.id, plan: 'business' });
    expect(payload.exp! - payload.iat!).toBe(60);
    expect(headers['x-tollgate-consumer-id']).toBe(key.id);
    expect(headers['x-tollgate-plan']).toBe('business');
  });

  it('reuses the token across requests of one key, and not across keys', async () => {
    const tokens: string[] = [];
    for (let i = 0; i < 5; i++) {
      await fetch(`${gatewayUrl}/v1/store/orders`, { headers: bearer(key.key) });
      tokens.push(String(upstream.seen.at(-1)!.headers['x-tollgate-assertion']));
    }
    expect(new Set(tokens).size).toBe(1);
    await fetch(`${gatewayUrl}/v1/store/orders`, { headers: bearer(other.key) });
    const otherToken = String(upstream.seen.at(-1)!.headers['x-tollgate-assertion']);
    expect(otherToken).not.toBe(tokens[0]);
    expect((await jwtVerify(otherToken, secretKey(TEST_ASSERTION_SECRET))).payload).toMatchObject({ sub: other.id, plan: 'free' });
  });

  it('replaces an assertion the client sent (and its identity headers)', async () => {
    const forged = await gatewayIdentity({ sub: other.id, plan: 'enterprise' });
    await fetch(`${gatewayUrl}/v1/categories`, { headers: { ...bearer(key.key), ...forged } });
    const headers = upstream.seen.at(-1)!.headers;
    expect(headers['x-tollgate-assertion']).not.toBe(forged['x-tollgate-assertion']);
    expect((await jwtVerify(String(headers['x-tollgate-assertion']), secretKey(TEST_ASSERTION_SECRET))).payload.sub).toBe(key.id);
    expect(headers['x-tollgate-consumer-id']).toBe(key.id);
    expect(headers['x-tollgate-plan']).toBe('business');
  });

  it('sends nothing for requests the gateway answers itself', async () => {
    const before = upstream.seen.length;
    expect((await fetch(`${gatewayUrl}/v1/categories`)).status).toBe(401);
    expect((await fetch(`${gatewayUrl}/v1/openapi.json`)).status).toBe(200);
    expect(upstream.seen.length).toBe(before);
  });
});

describe('the backend trusts only the gateway', () => {
  let backendUrl: string;
  let backend: TollgateProcess;
  let gatewayUrl: string;

  beforeAll(async () => {
    ({ url: backendUrl, process: backend } = await backendWith({}));
    gatewayUrl = (await gatewayWith(backendUrl)).url;
  });

  it('refuses a direct request with 401 invalid_gateway_assertion, on every route', async () => {
    for (const [method, path] of [
      ['GET', '/v1/categories'],
      ['POST', '/v1/categories'],
      ['GET', '/v1/pets/1'],
      ['GET', '/v1/store/orders'],
      ['GET', '/nowhere'],
    ]) {
      const res = await fetch(backendUrl + path!, { method, headers: { 'x-tollgate-consumer-id': key.id, 'x-tollgate-plan': 'business' } });
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ code: 'invalid_gateway_assertion', message: expect.any(String), status: 401 });
    }
    await backend.waitForLog('request refused: no valid gateway assertion');
  });

  it('refuses an assertion signed with another secret, or replayed for another consumer', async () => {
    const forged = await fetch(`${backendUrl}/v1/categories`, { headers: await gatewayIdentity({ secret: NEW_SECRET }) });
    expect(forged.status).toBe(401);
    const real = await gatewayIdentity({ sub: key.id, plan: 'business' });
    const replayed = await fetch(`${backendUrl}/v1/categories`, { headers: { ...real, 'x-tollgate-consumer-id': other.id } });
    expect(replayed.status).toBe(401);
    expect((await fetch(`${backendUrl}/v1/categories`, { headers: real })).status).toBe(200);
  });

  it('serves the same requests through the gateway', async () => {
    const created = await fetch(`${gatewayUrl}/v1/categories`, {
      method: 'POST',
      headers: { ...bearer(key.key), 'content-type': 'application/json' },
      body: '{"name":"Rabbit"}',
    });
    expect(created.status).toBe(201);
    expect((await fetch(`${gatewayUrl}/v1/categories`, { headers: bearer(key.key) })).status).toBe(200);
  });

  it('refuses a gateway holding another secret: an operator fault, so the client sees 502, /readyz and a metric show it, the cause is logged once', async () => {
    const stranger = await gatewayWith(backendUrl, { TOLLGATE_ASSERTION_SECRET: NEW_SECRET });
    expect((await (await fetch(`${stranger.adminUrl}/readyz`)).json()).checks.upstreamAcceptsAssertion).toBe(true);
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${stranger.url}/v1/categories`, { headers: bearer(key.key) });
      expect(res.status).toBe(502);
      expect(await res.json()).toEqual({ code: 'bad_gateway', message: expect.stringMatching(/gateway configuration fault/), status: 502 });
      expect(res.headers.get('x-ratelimit-limit')).toMatch(/^\d+$/);
    }
    await backend.waitForLog('request refused: no valid gateway assertion', 60_000, (l) =>
      String(l.reason).startsWith('ERR_JWKS_NO_MATCHING_KEY'),
    );
    await stranger.process.waitForLog(/rejects the gateway assertion/);
    expect(stranger.process.logs().filter((l) => /rejects the gateway assertion/.test(String(l.msg)))).toHaveLength(1);
    const ready = await fetch(`${stranger.adminUrl}/readyz`);
    expect(ready.status).toBe(503);
    expect((await ready.json()).checks.upstreamAcceptsAssertion).toBe(false);
    expect(await (await fetch(`${stranger.adminUrl}/metrics`)).text()).toMatch(/^tollgate_upstream_assertion_rejections_total 3$/m);
  });
});

describe('secret handling', () => {
  it('rotation: a backend holding the new and the previous secret accepts gateways on either', async () => {
    const backend = await backendWith({ TOLLGATE_ASSERTION_SECRET: NEW_SECRET, TOLLGATE_ASSERTION_SECRET_PREVIOUS: TEST_ASSERTION_SECRET });
    const oldGateway = await gatewayWith(backend.url);
    const newGateway = await gatewayWith(backend.url, { TOLLGATE_ASSERTION_SECRET: NEW_SECRET });
    expect((await fetch(`${oldGateway.url}/v1/store/orders`, { headers: bearer(key.key) })).status).toBe(200);
    expect((await fetch(`${newGateway.url}/v1/store/orders`, { headers: bearer(key.key) })).status).toBe(200);
  });

  it('without TOLLGATE_ASSERTION_SECRET gateway and backend refuse to start, naming the variable and TOLLGATE_DEV', async () => {
    for (const command of ['backend', 'gateway']) {
      const result = await runCli([command], {
        TOLLGATE_ASSERTION_SECRET: undefined,
        BACKEND_PORT: '0',
        GATEWAY_PORT: '0',
        ADMIN_PORT: '0',
      });
      expect(result.code, command).toBe(1);
      expect(result.stderr).toMatch(/^tollgate: environment: TOLLGATE_ASSERTION_SECRET: is unset: .*TOLLGATE_DEV=1/);
    }
  });

  it('in development (TOLLGATE_DEV=1) without a secret both processes warn loudly, and still work together', async () => {
    const backend = await backendWith({ TOLLGATE_ASSERTION_SECRET: undefined, TOLLGATE_DEV: '1' });
    const gateway = await gatewayWith(backend.url, { TOLLGATE_ASSERTION_SECRET: undefined, TOLLGATE_DEV: '1' });
    for (const process of [backend.process, gateway.process]) {
      const warning = await process.waitForLog(/^INSECURE: TOLLGATE_ASSERTION_SECRET/);
      expect(warning.level).toBe(40);
    }
    expect((await fetch(`${gateway.url}/v1/store/orders`, { headers: bearer(key.key) })).status).toBe(200);
    // ...but a backend holding a real secret does not accept the development default.
    const strict = await backendWith({});
    const res = await fetch(`${strict.url}/v1/store/orders`, {
      headers: await gatewayIdentity({ secret: 'tollgate-development-assertion-secret-NOT-FOR-PRODUCTION' }),
    });
    expect(res.status).toBe(401);
  });

  it('a configured secret is not warned about', async () => {
    const backend = await backendWith({});
    await backend.process.waitForLog('gateway assertion secret loaded');
    expect(backend.process.output()).not.toContain('INSECURE');
  });

  it('refuses to start with a secret shorter than 32 bytes, naming the variable', async () => {
    for (const command of ['backend', 'gateway']) {
      const result = await runCli([command], {
        TOLLGATE_ASSERTION_SECRET: 'too-short',
        BACKEND_PORT: '0',
        GATEWAY_PORT: '0',
        ADMIN_PORT: '0',
      });
      expect(result.code, command).toBe(1);
      expect(result.stderr).toMatch(/^tollgate: environment: TOLLGATE_ASSERTION_SECRET: must be at least 32 bytes/);
    }
  });

  it('tollgate up generates a per-process secret its gateway and backend share', async () => {
    const up = TollgateProcess.spawn(['up'], {
      GATEWAY_PORT: '0',
      ADMIN_PORT: '0',
      BACKEND_PORT: '0',
      TOLLGATE_ASSERTION_SECRET: undefined,
    });
    stoppers.push(() => up.stop());
    const gatewayUrl = await up.listening('gateway');
    const backendUrl = String((await up.waitForLog('backend listening')).url);
    await up.waitForLog('gateway assertions use a random secret generated for this process');
    await expect.poll(() => up.output().includes('Try:')).toBe(true);
    const demoKey = /^ {2}free\s+(tg_\S+)$/m.exec(up.output())![1]!;
    expect((await fetch(`${gatewayUrl}/v1/store/orders`, { headers: bearer(demoKey) })).status).toBe(200);
    // Neither the test secret nor the development default opens the backend.
    expect((await fetch(`${backendUrl}/v1/store/orders`, { headers: await gatewayIdentity() })).status).toBe(401);
    expect(up.output()).not.toContain('INSECURE');
  });
});
