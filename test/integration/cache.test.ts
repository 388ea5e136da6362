import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKENS, admin } from '../helpers/admin-client.js';
import { withServices } from '../helpers/counting-targets.js';
import { TestRedis } from '../helpers/redis-server.js';
import { ScriptedOrigin } from '../helpers/scripted-origin.js';
import { bearer, configCopy, createKey, startGateway, type GatewayHandle } from '../helpers/stack.js';

// The response cache (docs/cache.md) end to end: real gateway processes in front of a scripted
// origin, on a real redis-server. Each case uses its own path, so the origin's count for that path
// is exactly what the cache let through.

const SERVICES = (origin: string) => `
services:
  - name: mem
    paths: [/c]
    targets: [${origin}]
    cache: { ttlSeconds: 60, store: memory, staleIfErrorSeconds: 60 }
  - name: shared
    paths: [/r]
    targets: [${origin}]
    cache: { ttlSeconds: 60, store: redis }
  - name: nopriv
    paths: [/n]
    targets: [${origin}]
    cache: { ttlSeconds: 60, privateResponses: none }
  - name: honour
    paths: [/h]
    targets: [${origin}]
    cache: { ttlSeconds: 60, honourRequestNoCache: true }
`;

let redis: TestRedis;
let origin: ScriptedOrigin;
let gw1: GatewayHandle;
let gw2: GatewayHandle;
let keyA: string;
let keyB: string;
let idA: string;
let idB: string;

const json = (value: unknown) => JSON.stringify(value);
/** An origin script: the consumer the upstream saw (its plain header), with these fields. */
const echoing = (headers: Record<string, string | string[]>) => (req: { headers: Record<string, unknown> }, seen: number) => ({
  headers,
  body: json({ consumer: req.headers['x-tollgate-consumer-id'], seen }),
});

beforeAll(async () => {
  origin = await new ScriptedOrigin().start();
  redis = await TestRedis.start();
  const configDir = configCopy({
    'gateway.yaml': (text) =>
      withServices(text, SERVICES(origin.url)).replace(
        /^ {2}costs: \[\][^\n]*$/m,
        '  costs:\n    - { method: GET, path: /c/costly, cost: 3 }',
      ),
  });
  const env = { REDIS_URL: redis.url, UPSTREAM_URL: origin.url, TOLLGATE_CONFIG_DIR: configDir, TOLLGATE_ADMIN_TOKENS: ADMIN_TOKENS };
  [gw1, gw2] = await Promise.all([startGateway(env), startGateway(env)]);
  const big = ['--plan', 'enterprise', '--per-minute', '1000000', '--per-day', '10000000'];
  const [a, b] = await Promise.all([createKey(redis, big), createKey(redis, big)]);
  keyA = a.key;
  keyB = b.key;
  idA = a.id;
  idB = b.id;
}, 60_000);

afterAll(async () => {
  await Promise.all([gw1?.process.stop(), gw2?.process.stop()]);
  await redis?.stop();
  await origin?.stop();
});

interface Got {
  status: number;
  body: string;
  headers: Headers;
  cacheStatus: string | null;
  raw: Buffer;
}

/** One request over node:http (fetch would not send our Host): the same Host on both replicas, as behind a load balancer. */
async function get(
  path: string,
  key = keyA,
  options: { method?: string; headers?: Record<string, string>; body?: string; via?: GatewayHandle } = {},
): Promise<Got> {
  const url = new URL(path, (options.via ?? gw1).url);
  const headers: Record<string, string> = { host: 'api.test', ...bearer(key), ...options.headers };
  if (options.body !== undefined) {
    headers['content-type'] = 'application/json';
    headers['content-length'] = String(Buffer.byteLength(options.body));
  }
  return new Promise((resolve, reject) => {
    const req = request(url, { method: options.method ?? 'GET', headers, timeout: 20_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const raw = Buffer.concat(chunks);
        const h = new Headers();
        for (const [name, value] of Object.entries(res.headers))
          if (value !== undefined) h.set(name, Array.isArray(value) ? value.join(', ') : value);
        resolve({ status: res.statusCode ?? 0, body: raw.toString('latin1'), raw, headers: h, cacheStatus: h.get('cache-status') });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.end(options.body);
  });
}

describe('the corpus: what is stored and served, directive by directive', () => {
  const cases: Array<{ name: string; headers: Record<string, string | string[]>; stored: boolean }> = [
    { name: 'public-max-age', headers: { 'cache-control': 'public, max-age=60' }, stored: true },
    { name: 's-maxage', headers: { 'cache-control': 's-maxage=60' }, stored: true },
    { name: 'no-store', headers: { 'cache-control': 'public, max-age=60, no-store' }, stored: false },
    { name: 'private', headers: { 'cache-control': 'private, max-age=60' }, stored: false },
    { name: 'vary-star', headers: { 'cache-control': 'public, max-age=60', vary: '*' }, stored: false },
    { name: 'set-cookie', headers: { 'cache-control': 'public, max-age=60', 'set-cookie': 'session=abc' }, stored: false },
    { name: 'max-age-0-no-validator', headers: { 'cache-control': 'public, max-age=0' }, stored: false },
    { name: 'no-cache-no-validator', headers: { 'cache-control': 'public, no-cache' }, stored: false },
  ];
  for (const c of cases) {
    it(`${c.name}: ${c.stored ? 'stored, the second request is a hit' : 'never stored, every request goes upstream'}`, async () => {
      const path = `/c/corpus/${c.name}`;
      origin.script(path, echoing(c.headers));
      const first = await get(path);
      const second = await get(path);
      expect(first.status).toBe(200);
      expect(second.status).toBe(200);
      expect(origin.hitsOf(path)).toHaveLength(c.stored ? 1 : 2);
      expect(first.cacheStatus).toBe(`tollgate; fwd=miss${c.stored ? '; stored' : ''}`);
      expect(second.cacheStatus).toBe(c.stored ? 'tollgate; hit' : 'tollgate; fwd=miss');
      if (c.stored) {
        expect(second.body).toBe(first.body);
        expect(second.headers.get('age')).toMatch(/^\d+$/);
      }
      // Set-Cookie reaches the client that caused it, and only it.
      if (c.headers['set-cookie']) expect(second.headers.get('set-cookie')).toBe('session=abc');
    });
  }

  it('no Cache-Control at all: kept for ttlSeconds, for the consumer it was made for only', async () => {
    const path = '/c/corpus/none';
    origin.script(path, echoing({}));
    await get(path, keyA);
    const again = await get(path, keyA);
    const other = await get(path, keyB);
    expect(again.cacheStatus).toBe('tollgate; hit');
    expect(other.cacheStatus).toBe('tollgate; fwd=miss; stored');
    expect(JSON.parse(other.body).consumer).toBe(idB);
    expect(origin.hitsOf(path)).toHaveLength(2);
  });

  for (const directive of ['public, no-cache', 'public, max-age=0, must-revalidate', 'public, max-age=60, proxy-revalidate']) {
    it(`${directive} with an ETag: every use revalidated, a 304 refreshes the entry and the client gets the full response`, async () => {
      const path = `/c/corpus/revalidate-${directive.replace(/[^a-z0-9]+/g, '-')}`;
      origin.script(path, (req, seen) =>
        req.headers['if-none-match'] === '"v1"'
          ? { status: 304, headers: { etag: '"v1"', 'cache-control': directive } }
          : { headers: { etag: '"v1"', 'cache-control': directive }, body: json({ seen }) },
      );
      const first = await get(path);
      const second = await get(path);
      const third = await get(path);
      const hits = origin.hitsOf(path);
      expect(hits).toHaveLength(3);
      expect(hits[0]!.headers['if-none-match']).toBeUndefined();
      expect(hits[1]!.headers['if-none-match']).toBe('"v1"');
      expect(second.status).toBe(200);
      expect(second.body).toBe(first.body);
      expect(third.body).toBe(first.body);
      expect(second.cacheStatus).toBe('tollgate; fwd=stale; fwd-status=304');
      // The client's own condition is answered from the refreshed entry.
      const conditional = await get(path, keyA, { headers: { 'if-none-match': '"v1"' } });
      expect(conditional.status).toBe(304);
      expect(conditional.body).toBe('');
    });
  }

  it('a changed resource: the revalidation gets a 200 and the new response replaces the entry', async () => {
    const path = '/c/corpus/changed';
    let version = 1;
    origin.script(path, (req) =>
      req.headers['if-none-match'] === `"v${version}"`
        ? { status: 304, headers: { etag: `"v${version}"`, 'cache-control': 'public, no-cache' } }
        : { headers: { etag: `"v${version}"`, 'cache-control': 'public, no-cache' }, body: json({ version }) },
    );
    expect(JSON.parse((await get(path)).body)).toEqual({ version: 1 });
    version = 2;
    const changed = await get(path);
    expect(JSON.parse(changed.body)).toEqual({ version: 2 });
    expect(changed.cacheStatus).toBe('tollgate; fwd=stale; fwd-status=200; stored');
    const after = await get(path);
    expect(JSON.parse(after.body)).toEqual({ version: 2 });
    expect(after.cacheStatus).toBe('tollgate; fwd=stale; fwd-status=304');
  });

  it('Vary: each value of the named request field has its own entry', async () => {
    const path = '/c/corpus/vary';
    origin.script(path, (req) => ({
      headers: { 'cache-control': 'public, max-age=60', vary: 'Accept-Language' },
      body: json({ lang: req.headers['accept-language'] }),
    }));
    const en1 = await get(path, keyA, { headers: { 'accept-language': 'en' } });
    const fr1 = await get(path, keyB, { headers: { 'accept-language': 'fr' } });
    const en2 = await get(path, keyB, { headers: { 'accept-language': 'en' } });
    const fr2 = await get(path, keyA, { headers: { 'accept-language': 'fr' } });
    expect(JSON.parse(en1.body).lang).toBe('en');
    expect(JSON.parse(fr1.body).lang).toBe('fr');
    expect(JSON.parse(en2.body).lang).toBe('en');
    expect(JSON.parse(fr2.body).lang).toBe('fr');
    expect(fr1.cacheStatus).toBe('tollgate; fwd=vary-miss; stored');
    expect(en2.cacheStatus).toBe('tollgate; hit');
    expect(origin.hitsOf(path)).toHaveLength(2);
  });

  it('HEAD after GET is answered from the stored GET, with its length', async () => {
    const path = '/c/corpus/head';
    origin.script(path, echoing({ 'cache-control': 'public, max-age=60' }));
    const got = await get(path);
    const head = await get(path, keyA, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.body).toBe('');
    expect(head.cacheStatus).toBe('tollgate; hit');
    expect(head.headers.get('content-length')).toBe(String(Buffer.byteLength(got.body)));
    expect(origin.hitsOf(path)).toHaveLength(1);
  });

  it('a successful unsafe request invalidates its URI and its same-origin Location, not another origin’s', async () => {
    const list = '/c/items';
    const item = '/c/items/7';
    const elsewhere = '/c/items/8';
    for (const p of [list, item, elsewhere])
      origin.script(p, (req, seen) =>
        req.method === 'POST'
          ? { status: 201, headers: { location: item, 'content-location': `http://other.example${elsewhere}` }, body: '{}' }
          : { headers: { 'cache-control': 'public, max-age=60' }, body: json({ seen }) },
      );
    for (const p of [list, item, elsewhere]) await get(p);
    for (const p of [list, item, elsewhere]) expect((await get(p)).cacheStatus).toBe('tollgate; hit');
    const posted = await get(list, keyA, { method: 'POST', body: '{"name":"x"}' });
    expect(posted.status).toBe(201);
    expect(posted.cacheStatus).toBe('tollgate; fwd=method');
    expect((await get(list)).cacheStatus).toBe('tollgate; fwd=miss; stored');
    expect((await get(item)).cacheStatus).toBe('tollgate; fwd=miss; stored');
    expect((await get(elsewhere)).cacheStatus).toBe('tollgate; hit');
  });

  it('a failed unsafe request invalidates nothing', async () => {
    const path = '/c/failing-post';
    origin.script(path, (req) =>
      req.method === 'POST' ? { status: 400, body: '{}' } : { headers: { 'cache-control': 'public, max-age=60' }, body: '{}' },
    );
    await get(path);
    await get(path, keyA, { method: 'POST', body: '{}' });
    expect((await get(path)).cacheStatus).toBe('tollgate; hit');
  });

  it("a client's no-cache does not bust the cache unless the service honours it", async () => {
    const path = '/c/busting';
    origin.script(path, echoing({ 'cache-control': 'public, max-age=60', etag: '"b"' }));
    await get(path);
    expect((await get(path, keyA, { headers: { 'cache-control': 'no-cache', pragma: 'no-cache' } })).cacheStatus).toBe('tollgate; hit');
    expect(origin.hitsOf(path)).toHaveLength(1);
    const honoured = '/h/busting';
    origin.script(honoured, echoing({ 'cache-control': 'public, max-age=60' }));
    await get(honoured);
    expect((await get(honoured)).cacheStatus).toBe('tollgate; hit');
    expect((await get(honoured, keyA, { headers: { 'cache-control': 'no-cache' } })).cacheStatus).toBe(
      'tollgate; fwd=request; fwd-status=200; stored',
    );
    expect(origin.hitsOf(honoured)).toHaveLength(2);
  });

  it('stale-if-error: a stale entry answers when the upstream fails, within staleIfErrorSeconds', async () => {
    const path = '/c/stale-if-error';
    let failing = false;
    origin.script(path, () =>
      failing ? { status: 503, body: '{"down":true}' } : { headers: { 'cache-control': 'public, max-age=1' }, body: '{"up":true}' },
    );
    await get(path);
    failing = true;
    // Waits for the entry to go stale (an event the cache reports), then the 503 is covered.
    let got: Got;
    do got = await get(path);
    while (got.cacheStatus === 'tollgate; hit');
    expect(got.status).toBe(200);
    expect(got.body).toBe('{"up":true}');
    expect(got.cacheStatus).toBe('tollgate; fwd=stale; fwd-status=503; detail=stale-if-error');
  });

  it('a Range request bypasses the cache: a part is never stored nor served as the whole', async () => {
    const path = '/c/ranged';
    origin.script(path, (req) =>
      req.headers.range
        ? { status: 206, headers: { 'cache-control': 'public, max-age=60', 'content-range': 'bytes 0-1/10' }, body: '01' }
        : { headers: { 'cache-control': 'public, max-age=60' }, body: '0123456789' },
    );
    const part = await get(path, keyA, { headers: { range: 'bytes=0-1' } });
    expect(part.status).toBe(206);
    expect(part.cacheStatus).toBe('tollgate; fwd=bypass; detail=range');
    const whole = await get(path);
    expect(whole.body).toBe('0123456789');
    expect(whole.cacheStatus).toBe('tollgate; fwd=miss; stored');
  });

  it('a response larger than maxEntryBytes streams through unstored', async () => {
    const path = '/c/large';
    origin.script(path, () => ({ headers: { 'cache-control': 'public, max-age=60' }, body: 'x'.repeat(1024 * 1024 + 1) }));
    const first = await get(path);
    expect(first.body).toHaveLength(1024 * 1024 + 1);
    expect(first.cacheStatus).toBe('tollgate; fwd=miss');
    await get(path);
    expect(origin.hitsOf(path)).toHaveLength(2);
  });
});

describe('identity: no response meant for one key is served to another', () => {
  it('per-consumer entries, interleaved: every answer names its own consumer', async () => {
    const path = '/c/mine';
    origin.script(path, echoing({ 'cache-control': 'max-age=60' }));
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        i % 2 === 0 ? get(path, keyA).then((g) => ({ g, id: idA })) : get(path, keyB).then((g) => ({ g, id: idB })),
      ),
    );
    for (const { g, id } of answers) {
      expect(g.status).toBe(200);
      expect(JSON.parse(g.body).consumer).toBe(id);
    }
    // Each consumer's own entry: at most a few trips each (concurrent first misses), far fewer than 40.
    expect(origin.hitsOf(path).length).toBeLessThanOrEqual(40);
    const later = await Promise.all([get(path, keyA), get(path, keyB)]);
    expect(later.map((l) => l.cacheStatus)).toEqual(['tollgate; hit', 'tollgate; hit']);
    expect(JSON.parse(later[0].body).consumer).toBe(idA);
    expect(JSON.parse(later[1].body).consumer).toBe(idB);
  });

  it('privateResponses: none keeps nothing that was not marked public', async () => {
    const path = '/n/mine';
    origin.script(path, echoing({ 'cache-control': 'max-age=60' }));
    await get(path, keyA);
    const again = await get(path, keyA);
    expect(again.cacheStatus).toBe('tollgate; fwd=miss');
    expect(origin.hitsOf(path)).toHaveLength(2);
  });
});

describe('quota stays exact on hits', () => {
  it('every hit is counted and charged with its route cost; an exhausted key is refused on hits too', async () => {
    const key = (await createKey(redis, ['--plan', 'free', '--per-minute', '10', '--per-day', '1000'])).key;
    const path = '/c/metered';
    const costly = '/c/costly';
    origin.script(path, echoing({ 'cache-control': 'public, max-age=60' }));
    origin.script(costly, echoing({ 'cache-control': 'public, max-age=60' }));
    const seen: Array<[string | null, string | null]> = [];
    for (let i = 0; i < 3; i++) {
      const g = await get(path, key);
      seen.push([g.cacheStatus, g.headers.get('x-ratelimit-remaining')]);
    }
    expect(seen).toEqual([
      ['tollgate; fwd=miss; stored', '9'],
      ['tollgate; hit', '8'],
      ['tollgate; hit', '7'],
    ]);
    const c1 = await get(costly, key);
    const c2 = await get(costly, key);
    expect([c1.headers.get('x-ratelimit-remaining'), c2.headers.get('x-ratelimit-remaining')]).toEqual(['4', '1']);
    expect(c2.cacheStatus).toBe('tollgate; hit');
    const refused = await get(costly, key);
    expect(refused.status).toBe(429);
    expect(refused.cacheStatus).toBeNull();
    const last = await get(path, key);
    expect(last.status).toBe(200);
    expect(last.headers.get('x-ratelimit-remaining')).toBe('0');
    expect((await get(path, key)).status).toBe(429);
    // The request's own id and rate-limit fields, never the stored ones.
    const id = 'cache-own-id-000001';
    const own = await get(path, keyA, { headers: { 'x-request-id': id } });
    expect(own.headers.get('x-request-id')).toBe(id);
    expect(origin.hitsOf(path)).toHaveLength(1);
  });
});

describe('coalescing', () => {
  it('200 concurrent misses for one entry make one upstream request', async () => {
    const path = '/c/crowd';
    origin.script(path, () => ({ headers: { 'cache-control': 'public, max-age=60' }, body: '{"crowd":true}', delayMs: 300 }));
    const answers = await Promise.all(Array.from({ length: 200 }, () => get(path)));
    expect(answers.every((a) => a.status === 200 && a.body === '{"crowd":true}')).toBe(true);
    expect(origin.hitsOf(path)).toHaveLength(1);
  });
});

describe('across replicas', () => {
  it('the redis store is shared: stored by one replica, a hit on the other; invalidation and purge reach both', async () => {
    const path = '/r/shared';
    origin.script(path, (req, seen) =>
      req.method === 'POST' ? { status: 204 } : { headers: { 'cache-control': 'public, max-age=60' }, body: json({ seen }) },
    );
    expect((await get(path, keyA, { via: gw1 })).cacheStatus).toBe('tollgate; fwd=miss; stored');
    expect((await get(path, keyA, { via: gw2 })).cacheStatus).toBe('tollgate; hit');
    await get(path, keyA, { via: gw2, method: 'POST', body: '{}' });
    expect((await get(path, keyA, { via: gw1 })).cacheStatus).toBe('tollgate; fwd=miss; stored');
    expect((await get(path, keyA, { via: gw2 })).cacheStatus).toBe('tollgate; hit');
    const purge = await admin(gw1.adminUrl, 'DELETE', '/services/shared/cache?prefix=/r/');
    expect(purge.status).toBe(200);
    expect(purge.body.purged).toBeGreaterThanOrEqual(1);
    expect((await get(path, keyA, { via: gw2 })).cacheStatus).toBe('tollgate; fwd=miss; stored');
    // A binary body survives the shared store byte for byte.
    const binary = '/r/binary';
    const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    origin.script(binary, () => ({
      headers: { 'cache-control': 'public, max-age=60', 'content-type': 'application/octet-stream' },
      body: bytes.toString('latin1'),
    }));
    const stored = await get(binary, keyA, { via: gw1 });
    const res = await get(binary, keyA, { via: gw2 });
    expect(res.cacheStatus).toBe('tollgate; hit');
    expect(stored.raw.length).toBeGreaterThan(256);
    expect(res.raw.equals(stored.raw)).toBe(true);
  });

  it('memory stores: an unsafe request and a purge on one replica reach the other over pub/sub', async () => {
    const path = '/c/replicated';
    origin.script(path, (req, seen) =>
      req.method === 'PUT' ? { status: 200, body: '{}' } : { headers: { 'cache-control': 'public, max-age=60' }, body: json({ seen }) },
    );
    for (const via of [gw1, gw2]) await get(path, keyA, { via });
    expect((await get(path, keyA, { via: gw2 })).cacheStatus).toBe('tollgate; hit');
    await get(path, keyA, { via: gw1, method: 'PUT', body: '{}' });
    await until(async () => (await get(path, keyA, { via: gw2 })).cacheStatus !== 'tollgate; hit');
    expect((await get(path, keyA, { via: gw2 })).cacheStatus).toBe('tollgate; hit');
    const purge = await admin(gw1.adminUrl, 'DELETE', '/services/mem/cache');
    expect(purge.status).toBe(200);
    await until(async () => (await get(path, keyA, { via: gw2 })).cacheStatus !== 'tollgate; hit');
    expect((await admin(gw1.adminUrl, 'DELETE', '/services/nosuch/cache')).status).toBe(404);
    // The services view (and the console's table) shows each cached service's hit ratio on this replica.
    const listed = (await admin(gw2.adminUrl, 'GET', '/services')).body.services as Array<{
      name: string;
      cache?: { hits: number; misses: number; hitRatio: number | null; store: string };
    }>;
    const mem = listed.find((s) => s.name === 'mem')!.cache!;
    expect(mem.store).toBe('memory');
    expect(mem.hits).toBeGreaterThan(0);
    expect(mem.hitRatio).toBeCloseTo(mem.hits / (mem.hits + mem.misses));
    expect(listed.find((s) => s.name === 'default')!.cache).toBeUndefined();
    const metrics = await (await fetch(`${gw2.adminUrl}/metrics`)).text();
    expect(metrics).toMatch(/tollgate_cache_lookups_total\{service="mem",result="hit"\} [1-9]/);
  });

  it('Redis gone: requests to a redis-store service still succeed, bypassing the cache', async () => {
    const path = '/r/without-redis';
    origin.script(path, echoing({ 'cache-control': 'public, max-age=60' }));
    await get(path, keyA, { via: gw1 });
    await redis.kill();
    try {
      for (let i = 0; i < 5; i++) {
        const g = await get(path, keyA, { via: gw1 });
        expect(g.status).toBe(200);
        expect(g.cacheStatus).toBe('tollgate; fwd=bypass; detail=store-unavailable');
      }
    } finally {
      await redis.launch();
    }
  });
});

async function until(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not reached');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
