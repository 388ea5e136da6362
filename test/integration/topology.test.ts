import { afterAll, beforeAll, expect, it } from 'vitest';
import { nginxBinary, TestNginx } from '../helpers/nginx.js';
import { describeNeeding } from '../helpers/needs-tool.js';
import type { TollgateProcess } from '../helpers/processes.js';
import { TestRedis } from '../helpers/redis-server.js';
import {
  bearer,
  configCopy,
  slackRedisTimeout,
  createKey,
  getFrom,
  startBackend,
  startGateway,
  type GatewayHandle,
  testPlans,
} from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// The docker-compose.yml topology as plain processes: Redis, the category backend, three
// gateways configured as in the compose file (QUOTA_REPLICAS=3, TRUST_PROXY_HOPS=1), and Debian's
// nginx in front running config/nginx.conf with only ports and paths rewritten.

const nginxPath = nginxBinary();

const SECRET = 'topology-test-assertion-secret-0123456789abcdef';
const PLANS = testPlans(2, { afterRejections: 20, window: 60, duration: 900 });

// These tests assert exact counts, so the config copy gets slackRedisTimeout (see stack.ts); the
// fault tests cover the tight shipped timeout.

let redis: TestRedis;
let backend: { process: TollgateProcess; url: string };
let gateways: GatewayHandle[];
let lb: TestNginx;
let configDir: string;

beforeAll(async () => {
  redis = await TestRedis.start(['--appendonly', 'yes', '--appendfsync', 'everysec']);
  configDir = configCopy({ 'plans.yaml': () => PLANS, 'gateway.yaml': slackRedisTimeout });
  const env = { REDIS_URL: redis.url, TOLLGATE_CONFIG_DIR: configDir, TOLLGATE_ASSERTION_SECRET: SECRET };
  backend = await startBackend(env);
  gateways = await Promise.all(
    [1, 2, 3].map(() => startGateway({ ...env, UPSTREAM_URL: backend.url, QUOTA_REPLICAS: '3', TRUST_PROXY_HOPS: '1' })),
  );
  lb = await TestNginx.start(
    nginxPath!,
    gateways.map((g) => new URL(g.url).host),
  );
});

afterAll(async () => {
  await lb?.stop();
  await Promise.all(gateways?.map((g) => g.process.stop()) ?? []);
  await backend?.process.stop();
  await redis?.stop();
});

const newKey = (plan: string) => createKey(redis, ['--plan', plan], configDir);

/** Responses minus what a hop legitimately changes (connection management, date, server). */
function endToEnd(res: Response): Record<string, string> {
  const out: Record<string, string> = {};
  res.headers.forEach((value, name) => {
    if (!['connection', 'keep-alive', 'date', 'server', 'transfer-encoding', 'x-request-id'].includes(name)) out[name] = value;
  });
  return out;
}

describeNeeding(
  nginxPath ? undefined : 'nginx is not installed (apt-get install nginx)',
  'nginx → three gateways → backend, on one Redis',
  () => {
    it('admits exactly 50 of 200 concurrent requests on a 50/minute plan through the load balancer', async () => {
      await awayFromDayEdge(20);
      const key = await newKey('fifty');
      const statuses = await Promise.all(
        Array.from({ length: 200 }, () => fetch(`${lb.url}/v1/categories`, { headers: bearer(key.key) }).then((r) => r.status)),
      );
      expect(statuses.filter((s) => s === 200)).toHaveLength(50);
      expect(statuses.filter((s) => s === 429)).toHaveLength(150);
      // nginx spread the load: every replica answered part of it.
      // (Access lines are written in batches, at most 100 ms late: wait until all 200 are in. Only
      // this key's: nginx's start probe, a 401, may be logged after the test began.)
      const servedNow = () => gateways.map((g) => g.process.logs().filter((l) => l.msg === 'request' && l.keyId === key.id).length);
      await expect.poll(() => servedNow().reduce((a, b) => a + b, 0), { timeout: 30_000 }).toBe(200);
      const served = servedNow();
      for (const count of served) expect(count).toBeGreaterThan(0);
    });

    it('passes rate-limit headers, Retry-After and the 429 Error body through unchanged', async () => {
      await awayFromDayEdge(20);
      const key = await newKey('tiny');
      const direct = gateways[0]!.url;
      const ok = await fetch(`${lb.url}/v1/categories`, { headers: bearer(key.key) });
      expect(ok.status).toBe(200);
      expect(ok.headers.get('x-ratelimit-limit')).toBe('2');
      expect(ok.headers.get('x-ratelimit-remaining')).toBe('1');
      expect(ok.headers.get('ratelimit-policy')).toBe('"minute";q=2;w=60, "day";q=2;w=86400');
      // Both windows have 1 left: the day, which resets later, binds.
      expect(ok.headers.get('ratelimit')).toMatch(/^"day";r=1;t=\d+$/);
      expect(ok.headers.get('x-request-id')).toBeTruthy();
      await fetch(`${direct}/v1/categories`, { headers: bearer(key.key) }); // the last one today

      // The same refusal straight from a gateway and through nginx, within one second.
      const [viaGateway, viaLb] = await Promise.all([
        fetch(`${direct}/v1/categories`, { headers: bearer(key.key) }),
        fetch(`${lb.url}/v1/categories`, { headers: bearer(key.key) }),
      ]);
      expect(viaLb.status).toBe(429);
      const body = await viaLb.text();
      expect(body).toBe(await viaGateway.text());
      expect(JSON.parse(body)).toEqual({ code: 'rate_limit_exceeded', message: expect.any(String), status: 429 });
      const [a, b] = [endToEnd(viaGateway), endToEnd(viaLb)];
      // Reset/Retry-After/RateLimit t= may tick over between the two answers.
      for (const name of ['retry-after', 'x-ratelimit-reset', 'ratelimit']) {
        expect(b[name], name).toBeTruthy();
        delete a[name];
        delete b[name];
      }
      expect(b).toEqual(a);
      expect(viaLb.headers.get('content-type')).toMatch(/^application\/json/);
      expect(Number(viaLb.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(viaLb.headers.get('x-ratelimit-remaining')).toBe('0');
    });

    it('counts failed authentications per real client address behind nginx (X-Forwarded-For)', async () => {
      const url = `${lb.url}/v1/categories`;
      const first = await getFrom('127.0.0.21', url, bearer('tg_not_a_key'));
      expect(first.status).toBe(401);
      expect(first.headers['x-ratelimit-remaining']).toBe('59');
      const statuses = await Promise.all(
        Array.from({ length: 61 }, () => getFrom('127.0.0.21', url, bearer('tg_bad')).then((r) => r.status)),
      );
      expect(statuses.filter((s) => s === 401)).toHaveLength(59);
      expect(statuses.filter((s) => s === 429)).toHaveLength(2);
      // Another client behind the same nginx keeps its own allowance.
      const other = await getFrom('127.0.0.22', url, bearer('tg_not_a_key'));
      expect(other.status).toBe(401);
      expect(other.headers['x-ratelimit-remaining']).toBe('59');
      // A client cannot pick its address by sending X-Forwarded-For itself: nginx appends the real one.
      const spoofed = await getFrom('127.0.0.21', url, { ...bearer('tg_bad'), 'x-forwarded-for': '203.0.113.9' });
      expect(spoofed.status).toBe(429);
    });

    it('creates and lists categories end to end', async () => {
      const key = await newKey('pro');
      const created = await fetch(`${lb.url}/v1/categories`, {
        method: 'POST',
        headers: { ...bearer(key.key), 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'Hedgehog' }),
      });
      expect(created.status).toBe(201);
      const category = await created.json();
      const list = await fetch(`${lb.url}/v1/categories`, { headers: bearer(key.key) });
      expect(await list.json()).toContainEqual(category);
    });
  },
);
