import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allowFields, call, preflight } from '../helpers/cors-stack.js';
import { runCli } from '../helpers/processes.js';
import { TestRedis } from '../helpers/redis-server.js';
import { awayFromDayEdge } from '../helpers/windows.js';
import { bearer, configCopy, createKey, startGateway, type CreatedKey, type GatewayHandle } from '../helpers/stack.js';

/**
 * CORS with real processes: a gateway with `cors:` (and a service overriding it) in front of an
 * upstream that sends its own Access-Control-* fields, answers 404/413, or never answers.
 * Requests come from chosen loopback addresses so each test's failed-authentication and preflight counts are its own.
 */
const APP = 'https://app.example';
const PARTNER = 'https://partner.example';
const EXPOSED =
  'X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, RateLimit, RateLimit-Policy, Retry-After, X-Request-Id, Deprecation, Sunset, Link, x-trace-note';

let redis: TestRedis;
let upstream: Server;
let gateway: GatewayHandle;
let key: CreatedKey;
let optionsSeen = 0;
let configDir: string;

const services = (target: string) => `services:
  - name: partner
    paths: [/v1/partner]
    targets: [${target}]
    cors:
      origins: [${PARTNER}]
      credentials: true
      maxAgeSeconds: 60
  - name: slow
    paths: [/v1/slow]
    targets: [${target}]
    timeoutMs: 400
    retries: { attempts: 0 }
  - name: dead
    paths: [/v1/dead]
    targets: [http://127.0.0.1:9]
    retries: { attempts: 0 }
    ejection: { consecutiveFailures: 1, baseMs: 60000, maxEjectedPercent: 100 }
`;

const CORS = `
cors:
  origins: [${APP}, "https://*.example.org"]
  methods: [GET, POST, PUT, PATCH, DELETE]
  headers: [authorization, content-type, idempotency-key]
  exposeHeaders: [x-trace-note]
  credentials: false
  maxAgeSeconds: 600
`;

beforeAll(async () => {
  redis = await TestRedis.start();
  upstream = createServer((req, res) => {
    if (req.method === 'OPTIONS') optionsSeen++;
    const path = req.url ?? '';
    if (path.startsWith('/v1/slow')) return; // never answers: the gateway's 504
    res.setHeader('content-type', 'application/json');
    // An upstream with CORS of its own, wider than the operator's.
    res.setHeader('access-control-allow-origin', '*');
    res.setHeader('access-control-allow-credentials', 'true');
    res.setHeader('access-control-expose-headers', 'x-internal');
    res.setHeader('vary', 'Accept-Encoding');
    if (path.startsWith('/v1/missing')) res.statusCode = 404;
    if (path.startsWith('/v1/too-large')) res.statusCode = 413;
    res.end(JSON.stringify({ path }));
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const target = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  configDir = configCopy({
    'gateway.yaml': (t) =>
      t
        .replace(/^services: \[\].*$/m, services(target))
        .replace(/unauthenticated:\n {2}perMinute: 60/, 'unauthenticated:\n  perMinute: 8') + CORS,
    'plans.yaml': (t) => t.replace('plans:\n', 'plans:\n  narrow:     { perMinute: 60, perDay: 1000, services: [default] }\n'),
  });
  gateway = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: target, TOLLGATE_CONFIG_DIR: configDir });
  key = await createKey(redis, ['--plan', 'free']);
  // Counts are compared on keys whose day is as small as their minute: only midnight resets them.
  await awayFromDayEdge();
}, 90_000);

afterAll(async () => {
  await gateway?.process.stop();
  upstream?.closeAllConnections();
  await new Promise((resolve) => upstream?.close(resolve));
  await redis?.stop();
});

const url = (path: string) => gateway.url + path;

describe('preflight', () => {
  it('is answered 204 by the gateway for an allowed origin: methods, only the allowed requested headers, max age, never forwarded', async () => {
    const before = optionsSeen;
    const res = await preflight(url('/v1/categories'), APP, 'POST', 'Authorization, Content-Type, X-Evil', '127.0.0.11');
    expect(res.status).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe(APP);
    expect(res.headers['access-control-allow-methods']).toBe('GET, POST, PUT, PATCH, DELETE');
    expect(res.headers['access-control-allow-headers']).toBe('authorization, content-type');
    expect(res.headers['access-control-max-age']).toBe('600');
    expect(res.headers['access-control-allow-credentials']).toBeUndefined();
    expect(res.headers.vary).toMatch(/^Origin\b/);
    expect(res.headers['content-length']).toBeUndefined();
    expect(res.body).toBe('');
    expect(optionsSeen).toBe(before);
  });

  it('allows one label under a "*." origin, nothing deeper, nothing else', async () => {
    expect((await preflight(url('/v1/categories'), 'https://shop.example.org', 'GET', 'authorization', '127.0.0.12')).status).toBe(204);
    for (const origin of [
      'https://a.b.example.org',
      'https://example.org',
      'http://shop.example.org',
      'https://shop.example.org.evil',
      'null',
    ]) {
      const res = await preflight(url('/v1/categories'), origin, 'GET', 'authorization', '127.0.0.12');
      expect(res.status, origin).toBe(403);
    }
  });

  it('from an origin not allowed is 403 cors_origin_not_allowed without any Access-Control-Allow-* field', async () => {
    const before = optionsSeen;
    const res = await preflight(url('/v1/categories'), 'https://evil.example', 'GET', 'authorization', '127.0.0.13');
    expect(res.status).toBe(403);
    expect(JSON.parse(res.body)).toMatchObject({ code: 'cors_origin_not_allowed', status: 403 });
    expect(allowFields(res.headers)).toEqual([]);
    expect(res.headers.vary).toMatch(/Origin/);
    expect(optionsSeen).toBe(before);
  });

  it('consumes no quota: the key has as much left after three preflights as before', async () => {
    const counted = await createKey(redis, ['--plan', 'free', '--per-minute', '50', '--per-day', '50']);
    const first = await call(url('/v1/categories'), { headers: { ...bearer(counted.key), origin: APP }, from: '127.0.0.14' });
    expect(first.status).toBe(200);
    for (let i = 0; i < 3; i++)
      expect((await preflight(url('/v1/categories'), APP, 'GET', 'authorization', '127.0.0.14')).status).toBe(204);
    const second = await call(url('/v1/categories'), { headers: { ...bearer(counted.key), origin: APP }, from: '127.0.0.14' });
    expect(Number(second.headers['x-ratelimit-remaining'])).toBe(Number(first.headers['x-ratelimit-remaining']) - 1);
  });

  it('does not count under the failed-authentication limit of its address (8 here): ten preflights are all 204, and a keyless request still 401', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 10; i++) statuses.push((await preflight(url('/v1/categories'), APP, 'GET', 'authorization', '127.0.0.15')).status);
    expect(statuses).toEqual(Array(10).fill(204));
    expect((await call(url('/v1/categories'), { headers: { origin: APP }, from: '127.0.0.15' })).status).toBe(401);
  });
});

describe('actual requests', () => {
  it('from an allowed origin carry the origin, Vary and the exposed headers, replacing the upstream’s own Access-Control-* fields', async () => {
    const res = await call(url('/v1/categories'), { headers: { ...bearer(key.key), origin: APP }, from: '127.0.0.21' });
    expect(res.status).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBe(APP);
    expect(res.headers['access-control-allow-credentials']).toBeUndefined();
    expect(res.headers['access-control-expose-headers']).toBe(EXPOSED);
    expect(res.headers.vary).toBe('Origin, Accept-Encoding');
    expect(res.headers['x-ratelimit-remaining']).toBeDefined();
  });

  it('from an origin not allowed are served without any Access-Control-Allow-* field (the upstream’s `*` dropped too)', async () => {
    const res = await call(url('/v1/categories'), { headers: { ...bearer(key.key), origin: 'https://evil.example' }, from: '127.0.0.22' });
    expect(res.status).toBe(200);
    expect(allowFields(res.headers)).toEqual([]);
    expect(res.headers.vary).toBe('Origin, Accept-Encoding');
  });

  it('without Origin still vary by it (a shared cache must not serve this answer to a page)', async () => {
    const res = await call(url('/v1/categories'), { headers: bearer(key.key), from: '127.0.0.22' });
    expect(allowFields(res.headers)).toEqual([]);
    expect(res.headers.vary).toMatch(/^Origin/);
  });

  it('the public OpenAPI document is readable from an allowed origin', async () => {
    const res = await call(url('/v1/openapi.json'), { headers: { origin: APP }, from: '127.0.0.22' });
    expect(res.status).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBe(APP);
  });
});

describe('every error answer to an allowed origin carries Access-Control-Allow-Origin', () => {
  const expectReadable = (res: { headers: Record<string, unknown> }) => {
    expect(res.headers['access-control-allow-origin']).toBe(APP);
    expect(res.headers['access-control-expose-headers']).toBe(EXPOSED);
    expect(String(res.headers.vary)).toMatch(/Origin/);
  };

  it('401 missing and invalid key', async () => {
    const missing = await call(url('/v1/categories'), { headers: { origin: APP }, from: '127.0.0.31' });
    expect(missing.status).toBe(401);
    expectReadable(missing);
    const invalid = await call(url('/v1/categories'), { headers: { origin: APP, authorization: 'Bearer nope' }, from: '127.0.0.31' });
    expect(invalid.status).toBe(401);
    expectReadable(invalid);
  });

  it('403 service_not_in_plan', async () => {
    const narrow = await createKey(redis, ['--plan', 'narrow'], configDir);
    const res = await call(url('/v1/slow/x'), { headers: { ...bearer(narrow.key), origin: APP }, from: '127.0.0.32' });
    expect(res.status).toBe(403);
    expect(JSON.parse(res.body).code).toBe('service_not_in_plan');
    expectReadable(res);
  });

  it('404 and 413 of the upstream', async () => {
    for (const [path, status] of [
      ['/v1/missing', 404],
      ['/v1/too-large', 413],
    ] as const) {
      const res = await call(url(path), { headers: { ...bearer(key.key), origin: APP }, from: '127.0.0.33' });
      expect(res.status).toBe(status);
      expectReadable(res);
      expect(res.headers['access-control-allow-credentials']).toBeUndefined();
    }
  });

  it('429 rate_limit_exceeded with Retry-After', async () => {
    const tight = await createKey(redis, ['--plan', 'free', '--per-minute', '1', '--per-day', '1']);
    await call(url('/v1/categories'), { headers: { ...bearer(tight.key), origin: APP }, from: '127.0.0.34' });
    const res = await call(url('/v1/categories'), { headers: { ...bearer(tight.key), origin: APP }, from: '127.0.0.34' });
    expect(res.status).toBe(429);
    expect(res.headers['retry-after']).toBeDefined();
    expectReadable(res);
  });

  it('502 and then 503 from a dead target, 504 from a silent one', async () => {
    const bad = await call(url('/v1/dead'), { headers: { ...bearer(key.key), origin: APP }, from: '127.0.0.35' });
    expect(bad.status).toBe(502);
    expectReadable(bad);
    const ejected = await call(url('/v1/dead'), { headers: { ...bearer(key.key), origin: APP }, from: '127.0.0.35' });
    expect(ejected.status).toBe(503);
    expectReadable(ejected);
    const timeout = await call(url('/v1/slow'), { headers: { ...bearer(key.key), origin: APP }, from: '127.0.0.35' });
    expect(timeout.status).toBe(504);
    expectReadable(timeout);
  });
});

describe('a service with its own cors:', () => {
  it('replaces the top-level one for its paths, credentials included', async () => {
    const fromPartner = await preflight(url('/v1/partner/x'), PARTNER, 'GET', 'authorization', '127.0.0.41');
    expect(fromPartner.status).toBe(204);
    expect(fromPartner.headers['access-control-allow-credentials']).toBe('true');
    expect(fromPartner.headers['access-control-max-age']).toBe('60');
    expect((await preflight(url('/v1/partner/x'), APP, 'GET', 'authorization', '127.0.0.41')).status).toBe(403);
    // …and the top-level one still holds elsewhere.
    expect((await preflight(url('/v1/categories'), PARTNER, 'GET', 'authorization', '127.0.0.41')).status).toBe(403);
    const res = await call(url('/v1/partner/x'), { headers: { ...bearer(key.key), origin: PARTNER }, from: '127.0.0.41' });
    expect(res.headers['access-control-allow-origin']).toBe(PARTNER);
    expect(res.headers['access-control-allow-credentials']).toBe('true');
  });
});

describe('check-config refuses', () => {
  async function refused(edit: (t: string) => string): Promise<string> {
    const result = await runCli(['check-config', configCopy({ 'gateway.yaml': edit })], {});
    expect(result.code, result.stderr).toBe(1);
    return result.stderr.trim();
  }

  it('"*" with credentials, naming file and field', async () => {
    expect(await refused((t) => `${t}\ncors:\n  origins: [https://a.example, "*"]\n  credentials: true\n`)).toMatch(
      /^tollgate: gateway\.yaml: cors\.origins\.1: "\*" is allowed only with credentials: false/,
    );
  });

  it('"null" as an origin, also in a service', async () => {
    expect(await refused((t) => `${t}\ncors:\n  origins: ["null"]\n`)).toMatch(
      /^tollgate: gateway\.yaml: cors\.origins\.0: "null" is never allowed/,
    );
    const service =
      'services:\n  - name: s\n    paths: [/s]\n    targets: [http://127.0.0.1:1]\n    cors: { origins: [https://ok.example, "null"] }\n';
    expect(await refused((t) => t.replace(/^services: \[\].*$/m, service))).toMatch(
      /^tollgate: gateway\.yaml: services\.0\.cors\.origins\.1: "null" is never allowed/,
    );
  });

  it('an origin with a path, a default port, or a bare "*." domain', async () => {
    expect(await refused((t) => `${t}\ncors:\n  origins: [https://a.example/app]\n`)).toMatch(/cors\.origins\.0: must be an origin like/);
    expect(await refused((t) => `${t}\ncors:\n  origins: ["https://a.example:443"]\n`)).toMatch(
      /cors\.origins\.0: leave out the default port/,
    );
    expect(await refused((t) => `${t}\ncors:\n  origins: ["https://*.com"]\n`)).toMatch(
      /cors\.origins\.0: "\*\." must be followed by a domain/,
    );
  });

  it('a preflight budget that is not a positive whole number, top level or in a service', async () => {
    expect(await refused((t) => `${t}\ncors:\n  origins: [https://a.example]\n  preflightsPerMinute: 0\n`)).toMatch(
      /^tollgate: gateway\.yaml: cors\.preflightsPerMinute: /,
    );
    const service =
      'services:\n  - name: s\n    paths: [/s]\n    targets: [http://127.0.0.1:1]\n    cors: { origins: [https://ok.example], preflightsPerMinute: 2.5 }\n';
    expect(await refused((t) => t.replace(/^services: \[\].*$/m, service))).toMatch(
      /^tollgate: gateway\.yaml: services\.0\.cors\.preflightsPerMinute: /,
    );
  });

  it('and accepts "*" without credentials', async () => {
    const result = await runCli(['check-config', configCopy({ 'gateway.yaml': (t) => `${t}\ncors:\n  origins: ["*"]\n` })], {});
    expect(result.code, result.stderr).toBe(0);
  });
});
