import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, configCopy, createKey, startGateway, type CreatedKey, type GatewayHandle } from '../helpers/stack.js';

// Deprecation and sunset rules from gateway.yaml, through a real gateway process, and their hot
// reload when an operator edits the file.

const SHIPPED_LINK =
  '<https://developer.example.com/deprecations/get-pet>; rel="deprecation"; type="text/html", <https://developer.example.com/sunset-policy>; rel="sunset"';

let redis: TestRedis;
let upstream: EchoUpstream;
let gateway: GatewayHandle;
let key: CreatedKey;
let configDir: string;
let shippedGatewayYaml: string;

beforeAll(async () => {
  redis = await TestRedis.start();
  upstream = await new EchoUpstream().start();
  configDir = configCopy();
  shippedGatewayYaml = readFileSync(join(configDir, 'gateway.yaml'), 'utf8');
  gateway = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: upstream.url, TOLLGATE_CONFIG_DIR: configDir });
  key = await createKey(redis, ['--plan', 'business']);
});

afterAll(async () => {
  await gateway?.process.stop();
  await upstream?.stop();
  await redis?.stop();
});

const get = (path: string, method = 'GET') => fetch(gateway.url + path, { method, headers: bearer(key.key) });
const deprecationHeaders = (res: Response) => ({
  deprecation: res.headers.get('deprecation'),
  sunset: res.headers.get('sunset'),
  link: res.headers.get('link'),
});
const editGatewayYaml = (edit: (text: string) => string) => writeFileSync(join(configDir, 'gateway.yaml'), edit(shippedGatewayYaml));

describe('deprecated route (shipped rule: GET /v1/pets/{petId})', () => {
  it('carries Deprecation, Sunset and Link, and is still proxied', async () => {
    const res = await get('/v1/pets/42?expand=owner');
    expect(res.status).toBe(200);
    expect(deprecationHeaders(res)).toEqual({ deprecation: '@1767225600', sunset: 'Wed, 30 Jun 2027 00:00:00 GMT', link: SHIPPED_LINK });
    expect(upstream.seen.at(-1)!.url).toBe('/v1/pets/42?expand=owner');
    // The rate-limit headers are there too: the rule runs after the quota.
    expect(res.headers.get('x-ratelimit-limit')).toBe('1000');
  });

  it('applies to HEAD as to GET', async () => {
    expect(deprecationHeaders(await get('/v1/pets/7', 'HEAD')).deprecation).toBe('@1767225600');
  });

  it('leaves other routes and methods alone', async () => {
    for (const [method, path] of [
      ['GET', '/v1/categories'],
      ['POST', '/v1/pets/42'],
      ['GET', '/v1/pets/42/toys'],
      ['GET', '/v1/pets'],
    ]) {
      expect(deprecationHeaders(await get(path!, method)), `${method} ${path}`).toEqual({ deprecation: null, sunset: null, link: null });
    }
  });

  it('keeps the headers on an upstream failure (502)', async () => {
    upstream.behaviour = (req) => req.socket.destroy();
    try {
      const res = await get('/v1/pets/42');
      expect(res.status).toBe(502);
      expect(deprecationHeaders(res).sunset).toBe('Wed, 30 Jun 2027 00:00:00 GMT');
    } finally {
      upstream.behaviour = new EchoUpstream().behaviour;
    }
  });

  it('does not mark unauthenticated answers (they stop before the rules)', async () => {
    const res = await fetch(`${gateway.url}/v1/pets/42`);
    expect(res.status).toBe(401);
    expect(res.headers.get('deprecation')).toBeNull();
  });
});

describe('rules reload with gateway.yaml, without a restart', () => {
  it('a new sunset date is in force within seconds', async () => {
    editGatewayYaml((t) => t.replace('sunsetAt: 2027-06-30T00:00:00Z', 'sunsetAt: 2028-01-31T12:30:00Z'));
    await expect
      .poll(async () => (await get('/v1/pets/1')).headers.get('sunset'), { timeout: 30_000, interval: 200 })
      .toBe('Mon, 31 Jan 2028 12:30:00 GMT');
  });

  it('goneAfterSunset with a past sunset answers 410 route_sunset and the upstream sees nothing', async () => {
    editGatewayYaml((t) =>
      t
        .replace('sunsetAt: 2027-06-30T00:00:00Z', 'sunsetAt: 2026-03-01T00:00:00Z')
        .replace('goneAfterSunset: false', 'goneAfterSunset: true'),
    );
    await expect.poll(async () => (await get('/v1/pets/1')).status, { timeout: 30_000, interval: 200 }).toBe(410);
    const seenBefore = upstream.seen.length;
    const res = await get('/v1/pets/99');
    expect(res.status).toBe(410);
    expect(await res.json()).toEqual({
      code: 'route_sunset',
      message: 'GET /v1/pets/{petId} passed its sunset date (Sun, 01 Mar 2026 00:00:00 GMT) and is gone. See the Link header.',
      status: 410,
    });
    expect(deprecationHeaders(res)).toEqual({ deprecation: '@1767225600', sunset: 'Sun, 01 Mar 2026 00:00:00 GMT', link: SHIPPED_LINK });
    expect(res.headers.get('x-ratelimit-remaining')).not.toBeNull();
    expect(upstream.seen.length).toBe(seenBefore);
    // Other routes are unaffected.
    expect((await get('/v1/categories')).status).toBe(200);
  });

  it('an invalid change is refused with a logged error naming file and field; the last good rules stay', async () => {
    editGatewayYaml((t) => t.replace('sunsetAt: 2027-06-30T00:00:00Z', 'sunsetAt: 2025-01-01T00:00:00Z'));
    const refused = await gateway.process.waitForLog('config reload refused; the previous config stays in force', 60_000, (line) =>
      String(line.error).includes('routes.deprecations.0.sunsetAt'),
    );
    expect(refused.error).toMatch(/^gateway\.yaml: routes\.deprecations\.0\.sunsetAt: must not be earlier than deprecatedAt \(line \d+\)$/);
    const res = await get('/v1/pets/1');
    expect(res.status).toBe(410);
    expect(res.headers.get('sunset')).toBe('Sun, 01 Mar 2026 00:00:00 GMT');
  });

  it('removing the rules removes the headers', async () => {
    const withoutRules = shippedGatewayYaml.replace(/\nroutes:[\s\S]*?\n(?=\S)/, '\n');
    expect(withoutRules).not.toContain('deprecations');
    writeFileSync(join(configDir, 'gateway.yaml'), withoutRules);
    await expect.poll(async () => (await get('/v1/pets/1')).status, { timeout: 30_000, interval: 200 }).toBe(200);
    expect(deprecationHeaders(await get('/v1/pets/1'))).toEqual({ deprecation: null, sunset: null, link: null });
  });
});
