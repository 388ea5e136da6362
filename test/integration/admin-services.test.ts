import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, ADMIN_TOKENS, type AdminCall } from '../helpers/admin-client.js';
import { Contract } from '../helpers/contract.js';
import { CountingTarget, withServices } from '../helpers/counting-targets.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, configCopy, createKey, startGateway, type CreatedKey, type GatewayHandle } from '../helpers/stack.js';

// What an operator reads about the upstream services: GET /admin/v1/services (checked against
// openapi-admin.yaml) and /readyz, in front of real targets, one of which is killed. /readyz shows
// each service's targets in rotation, but its status stays about the gateway itself: with the
// default upstream down and a whole service ejected it still answers 200.

let redis: TestRedis;
let gateway: GatewayHandle;
let key: CreatedKey;
let contract: Contract;
/** upstream.url: started only to take a free port, then killed, so the default service is down. */
const deadDefault = new CountingTarget('default');
const cats = [new CountingTarget('cats-a'), new CountingTarget('cats-b')];
const gone = new CountingTarget('gone');

beforeAll(async () => {
  redis = await TestRedis.start();
  await Promise.all([deadDefault, ...cats, gone].map((t) => t.start()));
  await Promise.all([deadDefault.kill(), gone.kill()]);
  // cats: two failures in a row eject a target for a minute; at most one of the two at once.
  // gone: its one target may be ejected (100 %), after which it answers 503 at once.
  const config = configCopy({
    'gateway.yaml': (t) =>
      withServices(
        t,
        `
services:
  - name: cats
    paths: [/v1/cats]
    targets: [${cats[0]!.url}, ${cats[1]!.url}]
    ejection: { consecutiveFailures: 2, baseMs: 60000, maxMs: 60000, maxEjectedPercent: 50 }
  - name: gone
    paths: [/v1/gone]
    targets: [${gone.url}]
    ejection: { consecutiveFailures: 1, baseMs: 60000, maxMs: 60000, maxEjectedPercent: 100 }
`,
      ),
  });
  const env = { REDIS_URL: redis.url, UPSTREAM_URL: deadDefault.url, TOLLGATE_CONFIG_DIR: config, TOLLGATE_ADMIN_TOKENS: ADMIN_TOKENS };
  contract = await Contract.load('openapi-admin.yaml', '/admin/v1');
  gateway = await startGateway(env);
  key = await createKey(redis, ['--plan', 'enterprise']);
});

afterAll(async () => {
  await gateway?.process.stop();
  await Promise.all(cats.map((t) => t.kill()));
  await redis?.stop();
});

/** GET /admin/v1/services, which must conform to openapi-admin.yaml. */
async function services(token?: string | null): Promise<AdminCall> {
  const answer = await admin(gateway.adminUrl, 'GET', '/services', { token });
  expect(contract.check(answer), `GET /services → ${answer.status} ${JSON.stringify(answer.body)}`).toEqual([]);
  return answer;
}

const byName = (answer: AdminCall, name: string) => (answer.body.services as Array<{ name: string }>).find((s) => s.name === name) as any;

async function get(path: string): Promise<{ status: number; headers: Headers; body: any }> {
  const res = await fetch(`${gateway.url}${path}`, { headers: bearer(key.key) });
  return { status: res.status, headers: res.headers, body: await res.json() };
}

describe('GET /admin/v1/services', () => {
  it('needs an admin token like every other admin route', async () => {
    const answer = await services(null);
    expect(answer.status).toBe(401);
    expect(answer.body.code).toBe('missing_admin_token');
    expect((await services('not-a-token-0123456789abcdefghijklmnopq')).status).toBe(401);
  });

  it('lists the default service first, then the configured ones, every target in rotation at start', async () => {
    const answer = await services();
    expect(answer.status).toBe(200);
    expect(answer.headers.get('cache-control')).toBe('no-store');
    expect(answer.body.services.map((s: { name: string }) => s.name)).toEqual(['default', 'cats', 'gone']);
    expect(byName(answer, 'cats')).toEqual({
      name: 'cats',
      paths: ['/v1/cats'],
      stripPrefix: false,
      balance: 'round-robin',
      ipRules: null,
      requestHeaders: null,
      responseHeaders: null,
      validate: null,
      requireScopes: null,
      anonymous: null,
      limits: [],
      inFlight: 0,
      retriesInFlight: 0,
      maxEjected: 1,
      targets: cats.map((t) => ({
        url: t.url,
        weight: 1,
        inFlight: 0,
        inRotation: true,
        ejected: false,
        ejectedUntil: null,
        probeHealthy: true,
        ejections: 0,
      })),
    });
    expect(byName(answer, 'default')).toMatchObject({ paths: ['/'], maxEjected: 0, targets: [{ url: deadDefault.url, inRotation: true }] });
  });

  it('shows a killed target ejected until its re-admission while its clients saw no error, and counts it in metrics', async () => {
    await cats[1]!.kill();
    const startedAt = Date.now();
    // Round robin sends every other GET to the dead target: each is retried on the live one.
    for (let i = 0; i < 6; i++) expect((await get(`/v1/cats/${i}`)).status).toBe(200);
    const answer = await services();
    const [live, dead] = byName(answer, 'cats').targets;
    expect(live).toMatchObject({ url: cats[0]!.url, inRotation: true, ejected: false, ejections: 0 });
    expect(dead).toMatchObject({ url: cats[1]!.url, inRotation: false, ejected: true, probeHealthy: true, ejections: 1 });
    // 60 s ± 10 % jitter from the ejection.
    const until = Date.parse(dead.ejectedUntil);
    expect(until).toBeGreaterThanOrEqual(startedAt + 54_000);
    expect(until).toBeLessThanOrEqual(Date.now() + 66_000);

    const metrics = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
    expect(metrics).toContain(`tollgate_upstream_ejections_total{service="cats",target="${cats[1]!.url}"} 1`);
    expect(metrics).toMatch(/tollgate_upstream_retries_total\{service="cats",reason="connect"\} [1-9]/);
  });

  it('shows requests in flight on the service and on the target serving them', async () => {
    const held: ServerResponse[] = [];
    const live = cats[0]!;
    const original = live.behaviour;
    live.behaviour = (_req, res) => held.push(res);
    try {
      const pending = get('/v1/cats/held');
      const deadline = Date.now() + 5000;
      while (held.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      expect(held).toHaveLength(1);
      const service = byName(await services(), 'cats');
      expect(service.inFlight).toBe(1);
      expect(service.targets.map((t: { inFlight: number }) => t.inFlight)).toEqual([1, 0]);
      held[0]!.end('{}');
      expect((await pending).status).toBe(200);
      expect(byName(await services(), 'cats').inFlight).toBe(0);
    } finally {
      live.behaviour = original;
    }
  });
});

describe('/readyz', () => {
  it('answers 200 with every service down but one, and shows each service’s targets in rotation', async () => {
    // The default upstream refuses: a 502 to the client, nothing to /readyz's status.
    expect((await get('/v1/anything')).status).toBe(502);
    // gone's only target is ejected: then 503 upstream_unavailable at once, with Retry-After.
    let answer = await get('/v1/gone/1');
    for (let i = 0; i < 5 && answer.status !== 503; i++) answer = await get('/v1/gone/1');
    expect(answer.status).toBe(503);
    expect(answer.body).toMatchObject({ code: 'upstream_unavailable', status: 503 });
    expect(Number(answer.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);

    const ready = await fetch(`${gateway.adminUrl}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({
      status: 'ready',
      checks: { redis: true, upstreamAcceptsAssertion: true },
      services: {
        default: { inRotation: 1, targets: 1 },
        cats: { inRotation: 1, targets: 2 },
        gone: { inRotation: 0, targets: 1 },
      },
    });
  });
});
