import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CountingTarget, withServices } from '../helpers/counting-targets.js';
import { TestRedis } from '../helpers/redis-server.js';
import { inOneMinute } from '../helpers/windows.js';
import { bearer, configCopy, createKey, startGateway, type CreatedKey, type GatewayHandle } from '../helpers/stack.js';

// Services in gateway.yaml: the longest whole-segment prefix routes a canonical path, stripPrefix
// is seen byte-exact at the target, weights spread the load, and a path no service claims goes to
// upstream.url as before.

let redis: TestRedis;
let gateway: GatewayHandle;
let key: CreatedKey;
const fallback = new CountingTarget('fallback');
const cats = [new CountingTarget('cats-a'), new CountingTarget('cats-b')];
const dogs = new CountingTarget('dogs');
const kittens = new CountingTarget('kittens');

beforeAll(async () => {
  redis = await TestRedis.start();
  await Promise.all([fallback, ...cats, dogs, kittens].map((t) => t.start()));
  const config = configCopy({
    'gateway.yaml': (t) =>
      withServices(
        t,
        `
services:
  - name: cats
    paths: [/v1/cats]
    targets:
      - ${cats[0]!.url}
      - { url: ${cats[1]!.url}, weight: 3 }
  - name: kittens
    paths: [/v1/cats/kittens]
    stripPrefix: true
    targets: [${kittens.url}/base]
  - name: dogs
    paths: [/v1/dogs, /v2/dogs]
    stripPrefix: true
    targets: [${dogs.url}]
`,
      ).replace('  costs: []', "  costs:\n    - { method: GET, path: '/v1/dogs/{id}', cost: 7 }"),
  });
  gateway = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: fallback.url, TOLLGATE_CONFIG_DIR: config });
  key = await createKey(redis, ['--plan', 'enterprise']);
});

afterAll(async () => {
  await gateway?.process.stop();
  await Promise.all([fallback, ...cats, dogs, kittens].map((t) => t.kill()));
  await redis?.stop();
});

async function get(path: string): Promise<{ status: number; body: any }> {
  const res = await fetch(`${gateway.url}${path}`, { headers: bearer(key.key) });
  return { status: res.status, body: await res.json() };
}

describe('services by path prefix', () => {
  it('routes the longest whole-segment prefix, strips it where asked, and keeps the query', async () => {
    expect((await get('/v1/cats/7?x=1')).body).toMatchObject({ url: '/v1/cats/7?x=1' });
    expect((await get('/v1/cats/kittens/3?y=2')).body).toEqual(expect.objectContaining({ target: 'kittens', url: '/base/3?y=2' }));
    expect((await get('/v1/cats/kittens')).body).toEqual(expect.objectContaining({ target: 'kittens', url: '/base/' }));
    expect((await get('/v2/dogs/9')).body).toEqual(expect.objectContaining({ target: 'dogs', url: '/9' }));
    // Not a whole segment: /v1/catsup is nobody's, so it goes to the default service.
    expect((await get('/v1/catsup')).body).toEqual(expect.objectContaining({ target: 'fallback', url: '/v1/catsup' }));
    expect((await get('/v1/other')).body).toEqual(expect.objectContaining({ target: 'fallback' }));
  });

  it('matches on the canonical path: dot segments and doubled slashes cannot slip past a prefix', async () => {
    expect((await get('/v1/./dogs/%31')).body).toEqual(expect.objectContaining({ target: 'dogs', url: '/1' }));
    expect((await get('/v1//dogs/2')).body).toEqual(expect.objectContaining({ target: 'dogs', url: '/2' }));
    expect((await get('/v1/x/../dogs/3')).body).toEqual(expect.objectContaining({ target: 'dogs', url: '/3' }));
  });

  it('reads a path one way whatever its case: /V1/DOGS/x is routed to dogs and charged the cost of /v1/dogs/{id}', async () => {
    await inOneMinute(async () => {
      const remaining = async (path: string) => {
        const res = await fetch(`${gateway.url}${path}`, { headers: bearer(key.key) });
        expect(await res.json()).toEqual(expect.objectContaining({ target: 'dogs', url: path.replace(/^\/v1\/dogs/i, '') }));
        return Number(res.headers.get('x-ratelimit-remaining'));
      };
      const first = await remaining('/v1/dogs/1');
      expect(await remaining('/V1/DOGS/2')).toBe(first - 7);
      expect(await remaining('/v1/Dogs/3')).toBe(first - 14);
    });
  });

  it('spreads a service by weight, 1:3, smoothly', async () => {
    const before = cats.map((t) => t.hits.length);
    for (let i = 0; i < 40; i++) expect((await get(`/v1/cats/${i}`)).status).toBe(200);
    expect(cats.map((t, i) => t.hits.length - before[i]!)).toEqual([10, 30]);
  });

  it('names the service, the target and the tries in the access line', async () => {
    await get('/v2/dogs/77');
    const line = await gateway.process.waitForLog('request', 60_000, (l) => l.path === '/v2/dogs/77');
    expect(line).toMatchObject({ service: 'dogs', target: dogs.url, tries: 1 });
  });
});
