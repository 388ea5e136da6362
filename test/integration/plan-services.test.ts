import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lineOf } from '../helpers/config-lines.js';
import { CountingTarget, withServices } from '../helpers/counting-targets.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, configCopy, createKey, slackRedisTimeout, startGateway, type CreatedKey, type GatewayHandle } from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// Plans per service (docs/clients.md, "Plans per service"): a plan listing `services` reaches only those
// (`default` is upstream.url); another service answers 403 service_not_in_plan with the key's
// rate-limit headers, consuming nothing and never banning. Per-key quotas, owner scope, shadow
// plans and route costs keep working. A plans.yaml naming an unknown service, and a gateway.yaml
// dropping a named one, are refused on reload with the old config in force. One gateway, one Redis,
// real targets. Every plan's day is as small as its minute, so a minute edge changes nothing.

const PLANS = `
plans:
  catsonly:   { perMinute: 50, perDay: 50, services: [cats] }
  everything: { perMinute: 50, perDay: 50 }
  catsowner:  { perMinute: 50, perDay: 50, services: [cats, default], scope: owner }
  catsshadow: { perMinute: 50, perDay: 50, services: [cats], shadow: true }
ban: { afterRejections: 2, window: 600, duration: 600 }
`;
const services = (extra = '') => `
services:
  - name: cats
    paths: [/v1/cats]
    targets: [${cats.url}]
  - name: dogs
    paths: [/v1/dogs]
    targets: [${dogs.url}]
${extra}`;
const COSTS = `  costs:
    - { method: GET, path: "/v1/cats/heavy", cost: 5 }
    - { method: GET, path: "/v1/dogs/heavy", cost: 5 }`;

let redis: TestRedis;
let gateway: GatewayHandle;
let configDir: string;
let shippedGatewayYaml: string;
const fallback = new CountingTarget('fallback');
const cats = new CountingTarget('cats');
const dogs = new CountingTarget('dogs');
const birds = new CountingTarget('birds');

beforeAll(async () => {
  redis = await TestRedis.start();
  await Promise.all([fallback, cats, dogs, birds].map((t) => t.start()));
  configDir = configCopy({
    'gateway.yaml': (t) => {
      shippedGatewayYaml = slackRedisTimeout(t).replace(/^ {2}costs: \[\].*$/m, COSTS);
      return withServices(shippedGatewayYaml, services());
    },
    'plans.yaml': () => PLANS,
  });
  gateway = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: fallback.url, TOLLGATE_CONFIG_DIR: configDir });
});

afterAll(async () => {
  await gateway?.process.stop();
  await Promise.all([fallback, cats, dogs, birds].map((t) => t.kill()));
  await redis?.stop();
});

const newKey = (args: string[]): Promise<CreatedKey> => createKey(redis, args, configDir);
const get = (key: CreatedKey, path: string) => fetch(`${gateway.url}${path}`, { headers: bearer(key.key) });
const remaining = (res: Response) => Number(res.headers.get('x-ratelimit-remaining'));
const hits = () => [fallback, cats, dogs, birds].map((t) => t.hits.length);

/** The key's own usage report (GET /v1/usage: read, not counted). */
async function usage(key: CreatedKey): Promise<{ minute: { used: number }; day: { used: number }; bannedUntil: string | null }> {
  const res = await get(key, '/v1/usage');
  expect(res.status).toBe(200);
  return res.json();
}

/** A 403 service_not_in_plan carrying the rate-limit headers of the key's windows as they stand. */
async function refusedWith(res: Response, service: string, left: number, limit = 50): Promise<void> {
  expect(res.status).toBe(403);
  expect(await res.json()).toEqual({
    code: 'service_not_in_plan',
    message: expect.stringContaining(`does not include the service "${service}"`),
    status: 403,
  });
  expect(res.headers.get('x-ratelimit-limit')).toBe(String(limit));
  expect(remaining(res)).toBe(left);
  expect(Number(res.headers.get('x-ratelimit-reset'))).toBeGreaterThan(Date.now() / 1000);
  expect(res.headers.get('ratelimit-policy')).toBe(`"minute";q=${limit};w=60, "day";q=${limit};w=86400`);
  expect(res.headers.get('ratelimit')).toMatch(new RegExp(`^"(minute|day)";r=${left};t=\\d+$`));
  expect(res.headers.has('retry-after')).toBe(false);
}

describe('a plan limited to one service', () => {
  it('reaches that service, and gets 403 with the rate-limit headers and nothing consumed on another and on the default one', async () => {
    await awayFromDayEdge(20);
    const key = await newKey(['--plan', 'catsonly']);
    const ok = await get(key, '/v1/cats/1');
    expect(ok.status).toBe(200);
    expect(await ok.json()).toMatchObject({ target: 'cats' });
    expect(remaining(ok)).toBe(49);

    const before = hits();
    await refusedWith(await get(key, '/v1/dogs/1'), 'dogs', 49);
    await refusedWith(await get(key, '/v1/other'), 'default', 49);
    // More than ban.afterRejections of them: a refusal that consumes nothing never bans either.
    for (let i = 0; i < 4; i++) expect((await get(key, `/v1/dogs/${i}`)).status).toBe(403);
    expect(hits()).toEqual(before);
    expect(await usage(key)).toMatchObject({ minute: { used: 1 }, day: { used: 1 }, bannedUntil: null });

    const again = await get(key, '/v1/cats/2');
    expect(again.status).toBe(200);
    expect(remaining(again)).toBe(48);
  });

  it('keeps route costs per path: a costed path of its service consumes the cost, one of another service nothing', async () => {
    await awayFromDayEdge(20);
    const key = await newKey(['--plan', 'catsonly']);
    expect(remaining(await get(key, '/v1/cats/heavy'))).toBe(45);
    await refusedWith(await get(key, '/v1/dogs/heavy'), 'dogs', 45);
    expect(await usage(key)).toMatchObject({ day: { used: 5 } });
  });

  it('is refused under the key’s own quota, whose headers the 403 carries', async () => {
    await awayFromDayEdge(20);
    const key = await newKey(['--plan', 'catsonly', '--per-minute', '7', '--per-day', '7']);
    expect(remaining(await get(key, '/v1/cats/1'))).toBe(6);
    await refusedWith(await get(key, '/v1/dogs/1'), 'dogs', 6, 7);
  });

  it('under scope: owner, the 403 reports the owner’s shared windows; `default` listed reaches upstream.url', async () => {
    await awayFromDayEdge(20);
    const owner = `acme${Date.now()}`;
    const a = await newKey(['--plan', 'catsowner', '--owner', owner]);
    const b = await newKey(['--plan', 'catsowner', '--owner', owner]);
    expect(remaining(await get(a, '/v1/cats/1'))).toBe(49);
    const viaDefault = await get(b, '/v1/other');
    expect(viaDefault.status).toBe(200);
    expect(await viaDefault.json()).toMatchObject({ target: 'fallback' });
    expect(remaining(viaDefault)).toBe(48);
    await refusedWith(await get(b, '/v1/dogs/1'), 'dogs', 48);
    await refusedWith(await get(a, '/v1/dogs/1'), 'dogs', 48);
  });

  it('under a shadow plan, is admitted and counted, marked X-RateLimit-Shadow: service_not_in_plan and logged', async () => {
    await awayFromDayEdge(20);
    const key = await newKey(['--plan', 'catsshadow']);
    const res = await get(key, '/v1/dogs/1');
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ target: 'dogs' });
    expect(res.headers.get('x-ratelimit-shadow')).toBe('service_not_in_plan');
    expect(remaining(res)).toBe(49);
    const line = await gateway.process.waitForLog('request', 60_000, (l) => l.keyId === key.id);
    expect(line).toMatchObject({ shadowRefusal: 'service_not_in_plan', service: 'dogs' });
    expect((await get(key, '/v1/cats/1')).headers.get('x-ratelimit-shadow')).toBeNull();
  });
});

describe('a plan without services', () => {
  it('reaches every service and the default one', async () => {
    await awayFromDayEdge(20);
    const key = await newKey(['--plan', 'everything']);
    const answers = await Promise.all(['/v1/cats/1', '/v1/dogs/1', '/v1/other'].map((p) => get(key, p)));
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(await Promise.all(answers.map(async (r) => ((await r.json()) as { target: string }).target))).toEqual([
      'cats',
      'dogs',
      'fallback',
    ]);
    expect(await usage(key)).toMatchObject({ day: { used: 3 } });
  });
});

// Last: these change the config files for good, in this order.
describe('reloads checked across plans.yaml and gateway.yaml', () => {
  const refusal = (error: string) =>
    gateway.process.waitForLog('config reload refused; the previous config stays in force', 60_000, (l) => l.error === error);
  /** The config mistake `error`, at the line the file gives it. */
  const atLine = (error: string, line: number) => `${error} (line ${line})`;

  it('refuses a plans.yaml naming a service gateway.yaml does not define; the old plans stay', async () => {
    writeFileSync(join(configDir, 'plans.yaml'), PLANS.replace('services: [cats] }', 'services: [cats, dogs, birds] }'));
    await refusal(
      atLine(
        'plans.yaml: plans.catsonly.services.2: service "birds" is not defined in gateway.yaml (its services, or "default" for upstream.url)',
        lineOf(readFileSync(join(configDir, 'plans.yaml'), 'utf8'), 'birds'),
      ),
    );
    const key = await newKey(['--plan', 'catsonly']);
    expect((await get(key, '/v1/dogs/1')).status).toBe(403);
  });

  it('refuses a gateway.yaml reload dropping a service a plan names; the old services stay', async () => {
    const withoutCats = withServices(shippedGatewayYaml, `services:\n  - { name: dogs, paths: [/v1/dogs], targets: [${dogs.url}] }\n`);
    writeFileSync(join(configDir, 'gateway.yaml'), withoutCats);
    await refusal(
      atLine(
        'gateway.yaml: services: service "cats" is named by plan "catsonly" in plans.yaml; remove it from the plan first',
        lineOf(withoutCats, /^services:/),
      ),
    );
    const key = await newKey(['--plan', 'everything']);
    const before = cats.hits.length;
    const res = await get(key, '/v1/cats/9');
    expect(await res.json()).toMatchObject({ target: 'cats' });
    expect(cats.hits.length).toBe(before + 1);
  });

  it('takes the refused plans.yaml once a gateway.yaml defining its service is in force', async () => {
    const withBirds = services(`  - name: birds\n    paths: [/v1/birds]\n    targets: [${birds.url}]\n`);
    writeFileSync(join(configDir, 'gateway.yaml'), withServices(shippedGatewayYaml, withBirds));
    await gateway.process.waitForLog('config reloaded', 60_000, (l) => l.reason === 'gateway.yaml reloaded');
    const key = await newKey(['--plan', 'catsonly']);
    expect(await (await get(key, '/v1/birds/1')).json()).toMatchObject({ target: 'birds' });
    expect(await (await get(key, '/v1/dogs/1')).json()).toMatchObject({ target: 'dogs' });
    await refusedWith(await get(key, '/v1/other'), 'default', 48);
  });
});
