import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKENS, OPS_TOKEN } from '../helpers/admin-client.js';
import { call, type Reply } from '../helpers/edge-rules-stack.js';
import { runCli } from '../helpers/processes.js';
import { RecordingUpstream } from '../helpers/recording-upstream.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, configCopy, createKey, slackRedisTimeout, startGateways, testPlans, type GatewayHandle } from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// Limit rules (gateway.yaml `limits`, docs/policies.md) on three real gateway processes sharing one
// real Redis, behind a trusted proxy (127.0.0.2, gateway.trustedProxies): random sets of rules and
// requests sent at once never leave a request charged by one part (a rule, the plan) and refused
// by another, as the counts in Redis show against the admitted requests; a per-address login limit
// a client cannot dodge with X-Forwarded-For; a tenant header shared across keys; whenMissing;
// hot reload; what the admin API shows; check-config's errors. Windows are days: only midnight
// UTC could split a test (awayFromDayEdge).

const PROXY = '127.0.0.2';

const limitsYaml = (tenantPerDay: number) => `limits:
  - { name: login-per-address, match: { methods: [POST], path: /v1/login }, by: [client.address], perDay: 3 }
  - { name: tenant, match: { path: "/v1/tenant/{item}" }, by: ["header:x-tenant"], perDay: ${tenantPerDay}, whenMissing: refuse }
  - { name: p-tenant, match: { path: "/v1/prop/{item}" }, by: ["header:x-tenant"], perDay: 4 }
  - { name: p-user, match: { path: "/v1/prop/{item}" }, by: [consumer.id, "header:x-user"], perDay: 3 }
  - { name: p-item, match: { path: "/v1/prop/{item}" }, by: ["path:item"], perDay: 6, cost: 2 }
  - { name: p-burst, match: { path: "/v1/prop/{item}" }, by: ["header:x-tenant"], perDay: 6, algorithm: gcra, burst: 3 }
`;

/** The property's rules: name, limit, the attributes a request must carry for it to apply, units per request. */
const PROPERTY_RULES = [
  { name: 'p-tenant', needs: ['tenant'], cost: 1 },
  { name: 'p-user', needs: ['user'], cost: 1 },
  { name: 'p-item', needs: [], cost: 2 },
  { name: 'p-burst', needs: ['tenant'], cost: 1 },
] as const;

const gatewayYaml = (tenantPerDay: number) => (text: string) =>
  slackRedisTimeout(text)
    .replace(/^( {2}trustedProxies: )\[\]/m, `$1[${PROXY}/32]`)
    .replace(/^limits: \[\][^\n]*\n/m, limitsYaml(tenantPerDay));

let redis: TestRedis;
let upstream: RecordingUpstream;
let gateways: GatewayHandle[];
let configDir: string;

beforeAll(async () => {
  [redis, upstream] = await Promise.all([TestRedis.start(), new RecordingUpstream().start()]);
  configDir = configCopy({
    'plans.yaml': () => testPlans(3, { afterRejections: 1000, window: 60, duration: 60 }),
    'gateway.yaml': gatewayYaml(5),
  });
  gateways = await startGateways(3, {
    redisUrl: redis.url,
    upstreamUrl: upstream.url,
    configDir,
    env: { TOLLGATE_ADMIN_TOKENS: ADMIN_TOKENS },
  });
}, 400_000);

afterAll(async () => {
  await Promise.all((gateways ?? []).map((g) => g.process.stop()));
  await Promise.all([redis?.stop(), upstream?.stop()]);
});

const bigKey = () => createKey(redis, ['--plan', 'free', '--per-minute', '100000', '--per-day', '100000'], configDir);

/** Every limit counter of a rule in Redis, summed: what that rule has charged. */
async function charged(rule: string): Promise<number> {
  const client = redis.client();
  try {
    const keys: string[] = [];
    let cursor = '0';
    do {
      const [next, found] = await client.scan(cursor, 'MATCH', `tg:limit:${rule}:*`, 'COUNT', 1000);
      cursor = next;
      keys.push(...found);
    } while (cursor !== '0');
    let sum = 0;
    for (const key of keys) sum += Number((await client.hget(key, 'c')) ?? 0);
    return sum;
  } finally {
    client.disconnect();
  }
}

async function allLimitKeys(): Promise<string[]> {
  const client = redis.client();
  try {
    return await client.keys('tg:limit:*');
  } finally {
    client.disconnect();
  }
}

describe('limit rules on three gateways', () => {
  it('never charge a request one part refused: the counts in Redis are the admitted requests', async () => {
    await awayFromDayEdge(600);
    let run = 0;
    const request = fc.record({
      key: fc.integer({ min: 0, max: 2 }),
      gateway: fc.integer({ min: 0, max: 2 }),
      tenant: fc.option(fc.integer({ min: 0, max: 2 }), { nil: undefined }),
      user: fc.option(fc.integer({ min: 0, max: 1 }), { nil: undefined }),
      item: fc.integer({ min: 0, max: 2 }),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.array(request, { minLength: 5, maxLength: 30 }),
        fc.array(fc.integer({ min: 2, max: 12 }), { minLength: 3, maxLength: 3 }),
        async (requests, perDay) => {
          const tag = `r${++run}x${Date.now()}`;
          const keys = await Promise.all(
            perDay.map((n) => createKey(redis, ['--plan', 'free', '--per-minute', String(n), '--per-day', String(n)], configDir)),
          );
          const before = await Promise.all(PROPERTY_RULES.map((r) => charged(r.name)));
          // All at once, spread over the three gateways: the decisions race in Redis.
          const replies = await Promise.all(
            requests.map((r) =>
              call(`${gateways[r.gateway]!.url}/v1/prop/${tag}-i${r.item}`, {
                headers: {
                  ...bearer(keys[r.key]!.key),
                  ...(r.tenant !== undefined && { 'x-tenant': `${tag}-t${r.tenant}` }),
                  ...(r.user !== undefined && { 'x-user': `${tag}-u${r.user}` }),
                },
              }),
            ),
          );
          for (const reply of replies) {
            if (reply.status !== 200)
              expect(reply.json, reply.body).toEqual({ code: 'rate_limit_exceeded', message: expect.any(String), status: 429 });
          }
          const admitted = requests.filter((_, i) => replies[i]!.status === 200);
          // Each rule charged exactly the admitted requests it applies to, in its units.
          const after = await Promise.all(PROPERTY_RULES.map((r) => charged(r.name)));
          PROPERTY_RULES.forEach((rule, i) => {
            const applies = admitted.filter((r) => rule.needs.every((attribute) => r[attribute] !== undefined));
            expect(after[i]! - before[i]!, rule.name).toBe(applies.length * rule.cost);
          });
          // Each key's plan counted exactly its admitted requests, within its day.
          const client = redis.client();
          try {
            for (const [k, key] of keys.entries()) {
              const day = Number((await client.hget(`tg:quota:{${key.id}}`, 'dc')) ?? 0);
              expect(day).toBe(admitted.filter((r) => r.key === k).length);
              expect(day).toBeLessThanOrEqual(perDay[k]!);
            }
          } finally {
            client.disconnect();
          }
          // No counter over its limit, as the admitted requests show.
          const count = (f: (r: (typeof requests)[number]) => string | undefined) => {
            const counts = new Map<string, number>();
            for (const r of admitted) {
              const value = f(r);
              if (value !== undefined) counts.set(value, (counts.get(value) ?? 0) + 1);
            }
            return Math.max(0, ...counts.values());
          };
          expect(count((r) => (r.tenant === undefined ? undefined : `${r.tenant}`))).toBeLessThanOrEqual(3); // p-burst: a burst of 3
          expect(count((r) => (r.user === undefined ? undefined : `${r.key}/${r.user}`))).toBeLessThanOrEqual(3);
          expect(count((r) => `${r.item}`)).toBeLessThanOrEqual(3); // p-item: 6 units of 2
          // The values are in no Redis key.
          expect((await allLimitKeys()).filter((k) => k.includes(tag))).toEqual([]);
        },
      ),
      { numRuns: 6 },
    );
  }, 600_000);

  it('limit logins per trusted client address: through the proxy per client, directly per peer whatever X-Forwarded-For says', async () => {
    await awayFromDayEdge();
    const key = await bigKey();
    const login = (i: number, from: string, xff?: string): Promise<Reply> =>
      call(`${gateways[i % 3]!.url}/v1/login`, {
        method: 'POST',
        localAddress: from,
        headers: { ...bearer(key.key), ...(xff !== undefined && { 'x-forwarded-for': xff }) },
      });
    const viaProxy = [];
    for (let i = 0; i < 4; i++) viaProxy.push(await login(i, PROXY, '198.51.100.10'));
    expect(viaProxy.map((r) => r.status)).toEqual([200, 200, 200, 429]);
    const refused = viaProxy[3]!;
    expect(refused.json).toMatchObject({ code: 'rate_limit_exceeded', status: 429 });
    expect(refused.json.message).toContain('login-per-address');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(refused.headers['ratelimit-policy']).toMatch(
      /^"minute";q=100000;w=60, "day";q=100000;w=86400, "login-per-address";q=3;w=86400$/,
    );
    expect(refused.headers.ratelimit).toMatch(/^"login-per-address";r=0;t=\d+$/);
    expect(refused.headers['x-ratelimit-limit']).toBe('3');
    expect(viaProxy[2]!.headers.ratelimit).toMatch(/^"login-per-address";r=0;t=\d+$/);
    // Another client behind the proxy has its own count.
    expect((await login(0, PROXY, '198.51.100.11')).status).toBe(200);
    // A client reaching the port directly is its socket address, whatever it writes.
    const direct = [];
    for (let i = 0; i < 4; i++) direct.push((await login(i, '127.0.0.3', `203.0.113.${i}`)).status);
    expect(direct).toEqual([200, 200, 200, 429]);
    // Refusals by a rule count towards no ban and charge nothing else: the plan's day counted 3 + 1 + 3.
    const client = redis.client();
    try {
      expect(Number(await client.hget(`tg:quota:{${key.id}}`, 'dc'))).toBe(7);
      expect(Number((await client.hget(`tg:quota:{${key.id}}`, 'rc')) ?? 0)).toBe(0);
    } finally {
      client.disconnect();
    }
    expect((await allLimitKeys()).some((k) => k.includes('198.51.100') || k.includes('127.0.0.3'))).toBe(false);
  }, 120_000);

  it('share a tenant header across keys; a request without it is refused (whenMissing: refuse)', async () => {
    await awayFromDayEdge();
    const [a, b] = await Promise.all([bigKey(), bigKey()]);
    const tenant = `acme-${Date.now()}`;
    const get = (key: string, i: number, headers: Record<string, string>) =>
      call(`${gateways[i % 3]!.url}/v1/tenant/x`, { headers: { ...bearer(key), ...headers } });
    const statuses = [];
    for (let i = 0; i < 6; i++) statuses.push((await get(i % 2 ? b.key : a.key, i, { 'x-tenant': tenant })).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
    expect((await get(a.key, 0, { 'x-tenant': `${tenant}-other` })).status).toBe(200);
    const missing = await get(a.key, 1, {});
    expect(missing.status).toBe(400);
    expect(missing.json).toEqual({ code: 'limit_attribute_missing', message: expect.stringContaining('header:x-tenant'), status: 400 });

    // Hot: the limit raised in gateway.yaml applies on every gateway once reloaded.
    const reloaded = gateways.map((g) => g.process.waitForLog('config reloaded', 30_000));
    const path = join(configDir, 'gateway.yaml');
    writeFileSync(`${path}.next`, gatewayYaml(7)(readShipped()));
    renameSync(`${path}.next`, path);
    await Promise.all(reloaded);
    expect((await get(a.key, 0, { 'x-tenant': tenant })).status).toBe(200);
    expect((await get(b.key, 1, { 'x-tenant': tenant })).status).toBe(200);
    const eighth = await get(a.key, 2, { 'x-tenant': tenant });
    expect(eighth.status).toBe(429);
    expect(eighth.headers['ratelimit-policy']).toContain('"tenant";q=7;w=86400');

    // The admin API shows the rules in force.
    const services = await fetch(`${gateways[0]!.adminUrl}/admin/v1/services`, { headers: bearer(OPS_TOKEN) });
    const body = (await services.json()) as { limits: Array<{ name: string; perDay?: number }> };
    expect(body.limits.find((r) => r.name === 'tenant')).toMatchObject({ name: 'tenant', perDay: 7, whenMissing: 'refuse' });
  }, 120_000);
});

function readShipped(): string {
  return configCopyShipped;
}
const configCopyShipped = (() => {
  let shipped = '';
  configCopy({ 'gateway.yaml': (t) => (shipped = t) });
  return shipped;
})();

describe('check-config on limit rules', () => {
  const refused = async (edit: (yaml: string) => string) => {
    const dir = configCopy({ 'gateway.yaml': (t) => t.replace(/^limits: \[\][^\n]*\n/m, edit) });
    const result = await runCli(['check-config', dir], {});
    expect(result.code, result.stderr).toBe(1);
    return result.stderr.trim();
  };

  it('names the file, the field and the line of each mistake', async () => {
    expect(
      await refused(
        () => 'limits:\n  - { name: a, by: [client.address], perMinute: 5 }\n  - { name: a, by: [client.address], perDay: 5 }\n',
      ),
    ).toMatch(/^tollgate: gateway\.yaml: limits\.1\.name: duplicate limit rule name "a" \(line \d+\)$/);
    expect(await refused(() => 'limits:\n  - { name: a, by: [client.adress], perMinute: 5 }\n')).toMatch(
      /^tollgate: gateway\.yaml: limits\.0\.by\.0: "client\.adress": must be consumer\.id, .* \(line \d+\)$/,
    );
    expect(await refused(() => 'limits:\n  - { name: a, by: [client.address], perMinute: 5, perDay: 9 }\n')).toMatch(
      /^tollgate: gateway\.yaml: limits\.0\.perDay: set one window, not perMinute and perDay \(line \d+\)$/,
    );
    expect(await refused(() => 'limits:\n  - { name: a, match: { path: /v1/x }, by: ["path:id"], perMinute: 5 }\n')).toMatch(
      /^tollgate: gateway\.yaml: limits\.0\.by\.0: match\.path has no parameter \{id\} \(line \d+\)$/,
    );
  });
});
