import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Contract, type Observed } from '../helpers/contract.js';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { freePort } from '../helpers/ports.js';
import { REPO_ROOT } from '../helpers/processes.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, configCopy, createKey, startBackend, startGateway, type CreatedKey, type GatewayHandle } from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// Contract tests: real answers of the running system (the real backend and gateway processes on a
// real redis-server) checked against openapi.yaml with openapi-backend, success and error alike.

let contract: Contract;
let redis: TestRedis;
let backend: Awaited<ReturnType<typeof startBackend>>;
let gateway: GatewayHandle;
let key: CreatedKey;

async function send(
  base: string,
  method: string,
  path: string,
  opts: { headers?: Record<string, string>; body?: string } = {},
): Promise<Observed> {
  const res = await fetch(base + path, { method, headers: opts.headers, body: opts.body });
  const text = await res.text();
  return { method, path, status: res.status, headers: res.headers, body: text === '' ? undefined : JSON.parse(text) };
}
const json = (key: string) => ({ ...bearer(key), 'content-type': 'application/json' });

/** Asserts the answer has the expected status and conforms to the document. */
function conforms(observed: Observed, status: number): Observed {
  expect(observed.status, JSON.stringify(observed.body)).toBe(status);
  expect(contract.check(observed)).toEqual([]);
  return observed;
}

beforeAll(async () => {
  contract = await Contract.load();
  redis = await TestRedis.start();
  backend = await startBackend({ REDIS_URL: redis.url });
  gateway = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: backend.url });
  key = await createKey(redis, ['--plan', 'business']);
});

afterAll(async () => {
  await gateway?.process.stop();
  await backend?.process.stop();
  await redis?.stop();
});

describe('the contract checker', () => {
  it('finds departures (so a pass means something)', async () => {
    const real = await send(gateway.url, 'GET', '/v1/categories', { headers: bearer(key.key) });
    expect(contract.check(real)).toEqual([]);
    expect(contract.check({ ...real, body: [{ id: 'one', name: 'Dog' }] }).join()).toMatch(/body\/0\/id must be integer/);
    expect(contract.check({ ...real, body: [{ id: 1, name: 'Dog', extra: true }] }).join()).toMatch(/additional properties/);
    expect(contract.check({ ...real, status: 418 }).join()).toMatch(/status not documented/);
    const noHeaders = new Headers(real.headers);
    noHeaders.delete('x-ratelimit-remaining');
    noHeaders.set('ratelimit', 'twelve');
    expect(contract.check({ ...real, headers: noHeaders })).toEqual([
      'listCategories 200: header ratelimit must match pattern "^"[a-z0-9][a-z0-9_-]*";r=[0-9]+;t=[0-9]+$"',
      'listCategories 200: required header X-RateLimit-Remaining missing',
    ]);
  });
});

describe('success answers conform', () => {
  it('createCategory 201 and listCategories 200', async () => {
    const created = conforms(
      await send(gateway.url, 'POST', '/v1/categories', {
        headers: json(key.key),
        body: JSON.stringify({ name: 'Dog', description: 'Loyal companions' }),
      }),
      201,
    );
    conforms(await send(gateway.url, 'POST', '/v1/categories', { headers: json(key.key), body: '{"name":"Cat"}' }), 201);
    const listed = conforms(await send(gateway.url, 'GET', '/v1/categories', { headers: bearer(key.key) }), 200);
    expect(listed.body).toContainEqual(created.body);
  });

  it('listCategories 304 to If-None-Match naming the list as it is, 200 with a new ETag once it changed', async () => {
    const listed = conforms(await send(gateway.url, 'GET', '/v1/categories', { headers: bearer(key.key) }), 200);
    const etag = listed.headers.get('etag')!;
    expect(listed.headers.get('cache-control')).toBe('public, max-age=5');
    const same = conforms(
      await send(gateway.url, 'GET', '/v1/categories', { headers: { ...bearer(key.key), 'if-none-match': `"other", ${etag}` } }),
      304,
    );
    expect(same.body).toBeUndefined();
    expect(same.headers.get('etag')).toBe(etag);
    conforms(await send(gateway.url, 'POST', '/v1/categories', { headers: json(key.key), body: '{"name":"Rabbit"}' }), 201);
    const changed = conforms(
      await send(gateway.url, 'GET', '/v1/categories', { headers: { ...bearer(key.key), 'if-none-match': etag } }),
      200,
    );
    expect(changed.headers.get('etag')).not.toBe(etag);
    // The checker holds the 304 to what the document says of it (so a pass means something).
    const bare = new Headers(same.headers);
    bare.delete('etag');
    expect(contract.check({ ...same, headers: bare })).toEqual(['listCategories 304: required header ETag missing']);
  });

  it('listOrders 200', async () => {
    conforms(await send(gateway.url, 'GET', '/v1/store/orders?status=open', { headers: bearer(key.key) }), 200);
  });

  it('getPet 200 (deprecated) with Deprecation, Sunset and Link as configured', async () => {
    const pet = conforms(await send(gateway.url, 'GET', '/v1/pets/42', { headers: bearer(key.key) }), 200);
    expect(pet.headers.get('deprecation')).toBe('@1767225600');
    expect(pet.headers.get('sunset')).toBe('Wed, 30 Jun 2027 00:00:00 GMT');
    expect(pet.headers.get('link')).toBe(
      '<https://developer.example.com/deprecations/get-pet>; rel="deprecation"; type="text/html", <https://developer.example.com/sunset-policy>; rel="sunset"',
    );
    expect(contract.operation('GET', '/v1/pets/42').deprecated).toBe(true);
  });

  it('getOpenApiDocument 200 without a key: the YAML file as JSON, no quota used', async () => {
    const doc = conforms(await send(gateway.url, 'GET', '/v1/openapi.json'), 200);
    expect(doc.body).toEqual(parseYaml(readFileSync(join(REPO_ROOT, 'openapi.yaml'), 'utf8')));
    expect(doc.headers.get('x-ratelimit-limit')).toBeNull();
    // With a key it is the same answer and consumes nothing. (A key whose day binds: its count
    // survives a minute edge.)
    await awayFromDayEdge(20);
    const dayBound = await createKey(redis, ['--plan', 'enterprise', '--per-minute', '100', '--per-day', '100']);
    const before = Number(
      (await send(gateway.url, 'GET', '/v1/store/orders', { headers: bearer(dayBound.key) })).headers.get('x-ratelimit-remaining'),
    );
    for (let i = 0; i < 3; i++)
      expect((await send(gateway.url, 'GET', '/v1/openapi.json', { headers: bearer(dayBound.key) })).status).toBe(200);
    const after = Number(
      (await send(gateway.url, 'GET', '/v1/store/orders', { headers: bearer(dayBound.key) })).headers.get('x-ratelimit-remaining'),
    );
    expect(before - after).toBe(1);
  });

  it('HEAD of the document: its headers, no body; other methods: 405 with Allow', async () => {
    const head = await fetch(`${gateway.url}/v1/openapi.json`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(Number(head.headers.get('content-length'))).toBe(
      Buffer.byteLength(JSON.stringify(parseYaml(readFileSync(join(REPO_ROOT, 'openapi.yaml'), 'utf8')))),
    );
    expect(await head.text()).toBe('');
    const post = await send(gateway.url, 'POST', '/v1/openapi.json', { body: '{}' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
    expect(post.body).toEqual({ code: 'method_not_allowed', message: 'POST is not allowed on /v1/openapi.json.', status: 405 });
  });
});

describe('error answers conform', () => {
  it('createCategory 400 for a missing name, a sent id and invalid JSON', async () => {
    for (const body of ['{}', '{"id":1,"name":"Dog"}', '{"name":', '{"name":"  "}']) {
      const answer = conforms(await send(gateway.url, 'POST', '/v1/categories', { headers: json(key.key), body }), 400);
      expect(answer.body).toMatchObject({ code: expect.stringMatching(/^invalid_(body|json)$/), status: 400 });
    }
  });

  it('getPet 400 for a malformed petId, still with the deprecation headers', async () => {
    const answer = conforms(await send(gateway.url, 'GET', '/v1/pets/abc', { headers: bearer(key.key) }), 400);
    expect(answer.headers.get('deprecation')).toBe('@1767225600');
  });

  it('createCategory 413 and 415', async () => {
    const big = JSON.stringify({ name: 'Big', description: 'x'.repeat(70_000) });
    conforms(await send(gateway.url, 'POST', '/v1/categories', { headers: json(key.key), body: big }), 413);
    conforms(
      await send(gateway.url, 'POST', '/v1/categories', { headers: { ...bearer(key.key), 'content-type': 'text/plain' }, body: 'Dog' }),
      415,
    );
  });

  it('401 for a missing, malformed or unknown key, on every operation', async () => {
    const wrongKeys: Array<Record<string, string>> = [
      {},
      { authorization: 'Basic abc' },
      bearer('tg_000000000000_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'),
    ];
    for (const headers of wrongKeys) {
      for (const [method, path] of [
        ['GET', '/v1/categories'],
        ['POST', '/v1/categories'],
        ['GET', '/v1/pets/1'],
        ['GET', '/v1/store/orders'],
      ] as const) {
        const answer = conforms(await send(gateway.url, method, path, { headers }), 401);
        expect(answer.body).toMatchObject({ code: expect.stringMatching(/_api_key$/) });
      }
    }
  });

  it('429 over the quota, with Retry-After', async () => {
    // As many a day as a minute: the refusals are the day's, whatever the minute.
    await awayFromDayEdge(20);
    const small = await createKey(redis, ['--plan', 'enterprise', '--per-minute', '2', '--per-day', '2']);
    conforms(await send(gateway.url, 'GET', '/v1/store/orders', { headers: bearer(small.key) }), 200);
    conforms(await send(gateway.url, 'GET', '/v1/pets/7', { headers: bearer(small.key) }), 200);
    for (const [method, path] of [
      ['GET', '/v1/store/orders'],
      ['GET', '/v1/categories'],
      ['GET', '/v1/pets/7'],
      ['POST', '/v1/categories'],
    ] as const) {
      const answer = conforms(
        await send(gateway.url, method, path, { headers: json(small.key), body: method === 'POST' ? '{"name":"x"}' : undefined }),
        429,
      );
      expect(answer.body).toMatchObject({ code: 'rate_limit_exceeded', status: 429 });
    }
  });

  it('POST /v1/ws-tickets: a ticket for the key', async () => {
    const answer = conforms(await send(gateway.url, 'POST', '/v1/ws-tickets', { headers: bearer(key.key) }), 201);
    expect(answer.body).toMatchObject({ expiresInSeconds: 30 });
    conforms(await send(gateway.url, 'POST', '/v1/ws-tickets', {}), 401);
    const wrongMethod = conforms(await send(gateway.url, 'GET', '/v1/ws-tickets', { headers: bearer(key.key) }), 405);
    expect(wrongMethod.headers.get('allow')).toBe('POST');
  });

  it('404 for a path the document does not list', async () => {
    for (const path of ['/v1/categories/1', '/v1/nowhere', '/v1/pets/1/toys']) {
      const answer = await send(gateway.url, 'GET', path, { headers: bearer(key.key) });
      expect(answer.status).toBe(404);
      expect(() => contract.operation('GET', path)).toThrow(/not an operation/);
      expect(contract.checkComponentResponse('NotFound', answer)).toEqual([]);
    }
  });

  it('405 with Allow for a listed path and another method, as documented on that method', async () => {
    const answer = conforms(await send(gateway.url, 'DELETE', '/v1/categories', { headers: bearer(key.key) }), 405);
    expect(answer.headers.get('allow')).toBe('GET, POST, HEAD');
    conforms(await send(gateway.url, 'PUT', '/v1/pets/42', { headers: bearer(key.key) }), 405);
    conforms(await send(gateway.url, 'PATCH', '/v1/store/orders', { headers: bearer(key.key) }), 405);
    conforms(await send(gateway.url, 'DELETE', '/v1/categories'), 401);
    // The document needs no key: its 405 has no rate-limit headers, and says so.
    const document = conforms(await send(gateway.url, 'POST', '/v1/openapi.json'), 405);
    expect(document.headers.get('x-ratelimit-limit')).toBeNull();
  });
});

describe('answers of the gateway itself conform', () => {
  let upstream: EchoUpstream;
  let front: GatewayHandle;
  let gone: GatewayHandle;

  beforeAll(async () => {
    upstream = await new EchoUpstream().start();
    const shortTimeout = configCopy({ 'gateway.yaml': (t) => t.replace('timeoutMs: 15000', 'timeoutMs: 300') });
    front = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: upstream.url, TOLLGATE_CONFIG_DIR: shortTimeout });
    const sunsetPassed = configCopy({
      'gateway.yaml': (t) =>
        t
          .replace('sunsetAt: 2027-06-30T00:00:00Z', 'sunsetAt: 2026-06-30T00:00:00Z')
          .replace('goneAfterSunset: false', 'goneAfterSunset: true'),
    });
    gone = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: backend.url, TOLLGATE_CONFIG_DIR: sunsetPassed });
  });

  afterAll(async () => {
    await front?.process.stop();
    await gone?.process.stop();
    await upstream?.stop();
  });

  it('502 when the upstream resets, 504 when it is too slow', async () => {
    upstream.behaviour = (req) => req.socket.destroy();
    conforms(await send(front.url, 'GET', '/v1/store/orders', { headers: bearer(key.key) }), 502);
    upstream.behaviour = (_req, res) => setTimeout(() => res.end('[]'), 1000);
    conforms(await send(front.url, 'GET', '/v1/categories', { headers: bearer(key.key) }), 504);
  });

  it('502 when nothing listens upstream', async () => {
    const nowhere = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: `http://127.0.0.1:${await freePort()}` });
    try {
      conforms(await send(nowhere.url, 'POST', '/v1/categories', { headers: json(key.key), body: '{"name":"Dog"}' }), 502);
    } finally {
      await nowhere.process.stop();
    }
  });

  it('getPet 410 route_sunset once the sunset has passed and the rule says gone', async () => {
    const answer = conforms(await send(gone.url, 'GET', '/v1/pets/42', { headers: bearer(key.key) }), 410);
    expect(answer.body).toMatchObject({ code: 'route_sunset', status: 410 });
    expect(answer.headers.get('sunset')).toBe('Tue, 30 Jun 2026 00:00:00 GMT');
  });
});
