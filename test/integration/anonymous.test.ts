import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, replacingServices, type Reply } from '../helpers/edge-rules-stack.js';
import { RecordingUpstream } from '../helpers/recording-upstream.js';
import { TestRedis } from '../helpers/redis-server.js';
import {
  bearer,
  configCopy,
  createKey,
  keysCli,
  slackRedisTimeout,
  startBackend,
  startGateway,
  startGateways,
  testPlans,
  type GatewayHandle,
} from '../helpers/stack.js';
import { runCli, type TollgateProcess } from '../helpers/processes.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// Anonymous callers against real processes (docs/policies.md, "Scopes and anonymous callers"):
// three gateways behind a load balancer (trustProxyHops 1) on one Redis admit requests without a
// credential on the routes and services that say so, limited per trusted client address exactly
// across the replicas, with the rate-limit headers; the upstream sees the anonymous marker and no
// identity, whatever the client sent; a bad credential is still a 401; the address is in no Redis key.

const PUBLIC_PER_DAY = 5;

let redis: TestRedis;
let upstream: RecordingUpstream;
let gateways: GatewayHandle[];
let configDir: string;

beforeAll(async () => {
  [redis, upstream] = await Promise.all([TestRedis.start(), new RecordingUpstream().start()]);
  configDir = configCopy({
    // The day as small as the minute: a minute edge during the test resets nothing (awayFromDayEdge).
    'plans.yaml': () =>
      testPlans(3, { afterRejections: 1000, window: 60, duration: 60 }).replace(
        'plans:\n',
        `plans:\n  public: { perMinute: ${PUBLIC_PER_DAY}, perDay: ${PUBLIC_PER_DAY} }\n`,
      ),
    'gateway.yaml': (text) =>
      replacingServices(
        slackRedisTimeout(text).replace(/trustProxyHops: 0\b/, 'trustProxyHops: 1'),
        `
services:
  - name: open
    paths: [/v1/open]
    targets: [${upstream.url}]
    anonymous: { plan: public, methods: [GET, HEAD, POST] }
    requireScopes: { POST: [open:write] }
`,
      ).replace(
        /^ {2}costs: \[\][^\n]*\n/m,
        `  costs: []
  access:
    - { method: GET, path: /v1/categories, anonymous: { plan: public } }
    - { method: POST, path: /v1/ws-tickets, anonymous: { plan: public } }
`,
      ),
  });
  gateways = await startGateways(3, { redisUrl: redis.url, upstreamUrl: upstream.url, configDir });
}, 400_000);

afterAll(async () => {
  await Promise.all((gateways ?? []).map((g) => g.process.stop()));
  await Promise.all([redis?.stop(), upstream?.stop()]);
});

/** A request as the load balancer forwards it: the client's address appended to X-Forwarded-For. */
const from = (address: string, path: string, gateway = 0, headers: Record<string, string> = {}, method = 'GET') =>
  call(`${gateways[gateway]!.url}${path}`, { method, headers: { ...headers, 'x-forwarded-for': address } });

describe('anonymous callers on three gateways', () => {
  it("are limited per trusted client address, exactly across the replicas, every answer with the limit's headers", async () => {
    await awayFromDayEdge();
    const replies = await Promise.all(Array.from({ length: 12 }, (_, i) => from('198.51.100.7', '/v1/categories', i % 3)));
    const statuses = replies.map((r) => r.status).sort();
    expect(statuses).toEqual([...Array(PUBLIC_PER_DAY).fill(200), ...Array(12 - PUBLIC_PER_DAY).fill(429)]);
    for (const reply of replies) {
      expect(reply.headers['x-ratelimit-limit']).toBe(String(PUBLIC_PER_DAY));
      expect(reply.headers['ratelimit-policy']).toBe(`"minute";q=${PUBLIC_PER_DAY};w=60, "day";q=${PUBLIC_PER_DAY};w=86400`);
      if (reply.status === 429) {
        expect(reply.json.code).toBe('rate_limit_exceeded');
        expect(Number(reply.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      }
    }
    const remaining = replies.filter((r) => r.status === 200).map((r) => Number(r.headers['x-ratelimit-remaining']));
    expect(remaining.sort()).toEqual([0, 1, 2, 3, 4]);
    // Another address has its own window; the address the client wrote itself is not trusted.
    expect((await from('198.51.100.8', '/v1/categories', 1)).status).toBe(200);
    expect((await from('198.51.100.99, 198.51.100.7', '/v1/categories', 2)).status).toBe(429);
  });

  it('count an IPv6 client per /64: another address of the same /64 is the same caller', async () => {
    const first = await from('2001:db8:7:7::1', '/v1/categories', 0);
    const second = await from('2001:db8:7:7:abcd::2', '/v1/categories', 1);
    const elsewhere = await from('2001:db8:7:8::1', '/v1/categories', 2);
    expect([first.status, second.status, elsewhere.status]).toEqual([200, 200, 200]);
    expect(first.headers['x-ratelimit-remaining']).toBe(String(PUBLIC_PER_DAY - 1));
    expect(second.headers['x-ratelimit-remaining']).toBe(String(PUBLIC_PER_DAY - 2));
    expect(elsewhere.headers['x-ratelimit-remaining']).toBe(String(PUBLIC_PER_DAY - 1));
  });

  it('reach the upstream with the anonymous marker and no identity, whatever identity fields the client sent', async () => {
    const before = upstream.requests.length;
    const reply = await from('198.51.100.20', '/v1/open/things', 0, {
      'x-tollgate-anonymous': 'false',
      'x-tollgate-consumer-id': 'victim000001',
      'x-tollgate-plan': 'enterprise',
      'x-tollgate-assertion': 'forged',
      x_tollgate_consumer_id: 'victim000001',
    });
    expect(reply.status).toBe(200);
    expect(reply.headers['x-ratelimit-remaining']).toBe(String(PUBLIC_PER_DAY - 1));
    expect(upstream.requests.length).toBe(before + 1);
    const seen = upstream.requests.at(-1)!;
    expect(upstream.header(seen, 'x-tollgate-anonymous')).toEqual(['true']);
    expect(upstream.header(seen, 'x-tollgate-consumer-id')).toEqual([]);
    expect(upstream.header(seen, 'x_tollgate_consumer_id')).toEqual([]);
    expect(upstream.header(seen, 'x-tollgate-plan')).toEqual([]);
    const assertion = upstream.header(seen, 'x-tollgate-assertion');
    expect(assertion).toHaveLength(1);
    const claims = decodeJwt(assertion[0]!);
    expect(claims).toMatchObject({ anonymous: true, iss: 'tollgate' });
    expect(claims).not.toHaveProperty('sub');
  });

  it("a key's request never carries the anonymous marker, even when the client sends it", async () => {
    const { key, id } = await createKey(redis, ['--plan', 'free'], configDir);
    const reply = await from('198.51.100.21', '/v1/open/x', 1, { ...bearer(key), 'x-tollgate-anonymous': 'true' });
    expect(reply.status).toBe(200);
    const seen = upstream.requests.at(-1)!;
    expect(upstream.header(seen, 'x-tollgate-anonymous')).toEqual([]);
    expect(upstream.header(seen, 'x-tollgate-consumer-id')).toEqual([id]);
  });

  it('never turns a bad credential into an anonymous caller: still the 401 it was, nothing forwarded', async () => {
    const revoked = await createKey(redis, ['--plan', 'free'], configDir);
    expect((await keysCli(redis, ['revoke', revoked.id], configDir)).code).toBe(0);
    const before = upstream.requests.length;
    const cases: Array<[Record<string, string>, string]> = [
      [{ authorization: 'Bearer tg_not_a_key' }, 'malformed_api_key'],
      [bearer(revoked.key), 'revoked_api_key'],
      [{ authorization: 'Basic dXNlcjpwYXNz' }, 'malformed_api_key'],
      [{ authorization: '' }, 'missing_api_key'],
    ];
    for (const [headers, code] of cases) {
      const reply = await from('198.51.100.30', '/v1/categories', 2, headers);
      expect(reply.status, code).toBe(401);
      expect(reply.json.code).toBe(code);
    }
    expect(upstream.requests.length).toBe(before);
  });

  it('are not admitted where the route does not say so, nor where a scope is required (401 naming the scope)', async () => {
    const post = await from('198.51.100.40', '/v1/categories', 0, {}, 'POST');
    expect(post.status).toBe(401);
    expect(post.json.code).toBe('missing_api_key');
    const scoped = await from('198.51.100.40', '/v1/open/x', 0, {}, 'POST');
    expect(scoped.status).toBe(401);
    expect(scoped.json.code).toBe('missing_api_key');
    expect(scoped.headers['www-authenticate']).toBe('Bearer realm="tollgate", scope="open:write"');
    // The refusal consumed nothing of the address's window.
    expect(scoped.headers['x-ratelimit-remaining']).toBe(String(PUBLIC_PER_DAY));
    expect((await from('198.51.100.40', '/v1/other', 1)).status).toBe(401);
  });

  it('get no WebSocket ticket, even where a rule admits them: a ticket stands for a credential', async () => {
    const reply = await from('198.51.100.50', '/v1/ws-tickets', 0, {}, 'POST');
    expect(reply.status).toBe(401);
    expect(reply.json.code).toBe('missing_api_key');
  });

  it('are counted under ids that keep the address out of Redis', async () => {
    const quotaKeys = (await redis.client().keys('tg:quota:*')).filter((k) => k.includes('anon:'));
    // The addresses of the anonymous requests above: 198.51.100.7, .8, .20 and .40.
    expect(quotaKeys.length).toBeGreaterThanOrEqual(3);
    // Failed authentications are counted per address under tg:unauth (limit-failed-auth.ts), apart from this.
    const anywhere = (await redis.client().keys('*')).filter((k) => !k.startsWith('tg:unauth:'));
    expect(anywhere.filter((k) => /198\.51\.100/.test(k))).toEqual([]);
  });
});

describe('the README tour: an anonymous read of the bundled backend', () => {
  let backend: { process: TollgateProcess; url: string };
  let gateway: GatewayHandle;
  let tourConfig: string;

  beforeAll(async () => {
    tourConfig = configCopy();
    backend = await startBackend({ BACKEND_PORT: '0' });
    gateway = await startGateway({ UPSTREAM_URL: backend.url, TOLLGATE_CONFIG_DIR: tourConfig, GATEWAY_PORT: '0', ADMIN_PORT: '0' });
  }, 120_000);
  afterAll(async () => {
    await gateway?.process.stop();
    await backend?.process.stop();
  });

  /** Edits a config file in place and waits until the gateway has taken it. */
  async function edit(file: string, change: (text: string) => string): Promise<void> {
    const reloaded = () => gateway.process.logs().filter((l) => l.msg === 'config reloaded' && String(l.file).endsWith(file)).length;
    const before = reloaded();
    const path = join(tourConfig, file);
    writeFileSync(`${path}.next`, change(readFileSync(path, 'utf8')));
    renameSync(`${path}.next`, path);
    await gateway.process.waitForLog('config reloaded', 30_000, () => reloaded() > before);
  }

  it('is a 401 until a plan and a route admit it; then the backend answers, and the rate-limit headers say where it stands', async () => {
    const get = (): Promise<Reply> => call(`${gateway.url}/v1/categories`);
    expect((await get()).status).toBe(401);
    await edit('plans.yaml', (t) => t.replace('plans:\n', 'plans:\n  public: { perMinute: 10, perDay: 100 }\n'));
    await edit('gateway.yaml', (t) =>
      t.replace(
        /^ {2}costs: \[\][^\n]*\n/m,
        '  costs: []\n  access:\n    - { method: GET, path: /v1/categories, anonymous: { plan: public } }\n',
      ),
    );
    const reply = await get();
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual([]);
    expect(reply.headers['x-ratelimit-limit']).toBe('10');
    expect(reply.headers['x-ratelimit-remaining']).toBe('9');
    const write = await call(`${gateway.url}/v1/categories`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"name":"Dog"}',
    });
    expect(write.status).toBe(401);
  });

  it('refuses a gateway.yaml whose anonymous plan plans.yaml lacks, naming file and field', async () => {
    const refused = gateway.process.waitForLog(/^config reload refused/, 30_000, (l) => String(l.error).includes('anonymous.plan'));
    const path = join(tourConfig, 'gateway.yaml');
    writeFileSync(`${path}.next`, readFileSync(path, 'utf8').replace('anonymous: { plan: public }', 'anonymous: { plan: nosuch }'));
    renameSync(`${path}.next`, path);
    // With the line of the field (the config checks' messages name it).
    expect((await refused).error).toMatch(
      /^gateway\.yaml: routes\.access\.0\.anonymous\.plan: plan "nosuch" is not defined in plans\.yaml \(line \d+\)$/,
    );
    expect((await call(`${gateway.url}/v1/categories`)).status).toBe(200);
  });
});

describe('an anonymous plan plans.yaml lacks', () => {
  const dir = () =>
    configCopy({
      'gateway.yaml': (t) =>
        t.replace(
          /^ {2}costs: \[\][^\n]*\n/m,
          '  costs: []\n  access:\n    - { method: GET, path: /v1/categories, anonymous: { plan: public } }\n',
        ),
    });
  const refusal = 'gateway.yaml: routes.access.0.anonymous.plan: plan "public" is not defined in plans.yaml';

  it('is refused by check-config, naming file and field', async () => {
    const result = await runCli(['check-config', dir()], {});
    expect(result.code, result.stderr).toBe(1);
    expect(result.stderr).toMatch(new RegExp(`^tollgate: ${refusal.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\(line \\d+\\)\\n$`));
  });

  it('stops a gateway at start with the same message', async () => {
    const result = await runCli(['gateway'], { TOLLGATE_CONFIG_DIR: dir(), GATEWAY_PORT: '0', ADMIN_PORT: '0' });
    expect(result.code).not.toBe(0);
    expect(result.stderr + result.stdout).toContain(refusal);
  });
});

describe('an anonymous caller that keeps going after 429', () => {
  let banRedis: TestRedis;
  let gateway: GatewayHandle;

  beforeAll(async () => {
    banRedis = await TestRedis.start();
    const dir = configCopy({
      'plans.yaml': () =>
        testPlans(3, { afterRejections: 3, window: 60, duration: 600 }).replace(
          'plans:\n',
          'plans:\n  public: { perMinute: 2, perDay: 2 }\n',
        ),
      'gateway.yaml': (t) =>
        slackRedisTimeout(t).replace(
          /^ {2}costs: \[\][^\n]*\n/m,
          '  costs: []\n  access:\n    - { method: GET, path: /v1/categories, anonymous: { plan: public } }\n',
        ),
    });
    gateway = await startGateway({ REDIS_URL: banRedis.url, UPSTREAM_URL: upstream.url, TOLLGATE_CONFIG_DIR: dir });
  }, 120_000);
  afterAll(async () => {
    await gateway?.process.stop();
    await banRedis?.stop();
  });

  it('is banned like a key, at the configured count, and its address alone', async () => {
    await awayFromDayEdge();
    const statuses: Array<[number, string | undefined]> = [];
    for (let i = 0; i < 7; i++) {
      const reply = await call(`${gateway.url}/v1/categories`, { localAddress: '127.0.0.31' });
      statuses.push([reply.status, reply.json?.code]);
    }
    expect(statuses).toEqual([
      [200, undefined],
      [200, undefined],
      [429, 'rate_limit_exceeded'],
      [429, 'rate_limit_exceeded'],
      [429, 'api_key_banned'],
      [429, 'api_key_banned'],
      [429, 'api_key_banned'],
    ]);
    expect((await call(`${gateway.url}/v1/categories`, { localAddress: '127.0.0.32' })).status).toBe(200);
  });
});
