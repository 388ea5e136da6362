import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, configCopy, createKey, startGateway, testPlans, withLeases, type GatewayHandle } from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// Every answer to an identified caller carries the rate-limit fields, a shed one too (503
// gateway_overloaded: the quota call timed out on a Redis paused with SIGSTOP, silent for less
// than four command timeouts, so slow rather than gone). They come from what the gateway last
// heard of the key and never overstate: a window spent as heard is told as the 429 told it;
// otherwise the minute with nothing remaining.

let redis: TestRedis;
let upstream: EchoUpstream;
let gateway: GatewayHandle;
let configDir: string;

beforeAll(async () => {
  redis = await TestRedis.start();
  upstream = await new EchoUpstream().start();
  configDir = configCopy({
    'plans.yaml': () => testPlans(20, { afterRejections: 1_000_000, window: 60, duration: 60 }),
    'gateway.yaml': withLeases(false),
  });
  gateway = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: upstream.url, TOLLGATE_CONFIG_DIR: configDir });
});

afterAll(async () => {
  redis?.resume();
  await gateway?.process.stop();
  await upstream?.stop();
  await redis?.stop();
});

const ask = (key: string) => fetch(`${gateway.url}/v1/categories`, { headers: bearer(key), signal: AbortSignal.timeout(30_000) });

/** One request right after the last answer, while Redis is paused: shed, not degraded. */
async function whileRedisPaused(key: string): Promise<Response> {
  redis.pause();
  try {
    const res = await ask(key);
    await res.arrayBuffer();
    return res;
  } finally {
    redis.resume();
  }
}

const fields = (res: Response) => ({
  limit: res.headers.get('x-ratelimit-limit'),
  remaining: res.headers.get('x-ratelimit-remaining'),
  reset: res.headers.get('x-ratelimit-reset'),
});

describe('a request shed because its quota call timed out', () => {
  it('carries the minute with nothing remaining when the key had room', async () => {
    await awayFromDayEdge(120);
    const key = await createKey(redis, ['--plan', 'free', '--per-minute', '100', '--per-day', '1000'], configDir);
    const before = await ask(key.key);
    expect(before.status).toBe(200);
    expect(fields(before)).toMatchObject({ limit: '100', remaining: '99' });
    const shed = await whileRedisPaused(key.key);
    expect(shed.status).toBe(503);
    expect(shed.headers.get('retry-after')).toBe('1');
    expect(fields(shed)).toMatchObject({ limit: '100', remaining: '0' });
    const resetS = Number(shed.headers.get('x-ratelimit-reset'));
    expect(resetS).toBeGreaterThan(Date.now() / 1000 - 1);
    expect(resetS).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 60);
    expect(shed.headers.get('ratelimit')).toMatch(/^"minute";r=0;t=\d+$/);
    expect(shed.headers.get('ratelimit-policy')).toBe('"minute";q=100;w=60, "day";q=1000;w=86400');
  }, 60_000);

  it('carries the spent window as the 429 told it', async () => {
    await awayFromDayEdge(120);
    const key = await createKey(redis, ['--plan', 'tiny'], configDir);
    for (let i = 0; i < 20; i++) expect((await ask(key.key)).status).toBe(200);
    const refused = await ask(key.key);
    expect(refused.status).toBe(429);
    await refused.arrayBuffer();
    const shed = await whileRedisPaused(key.key);
    expect(shed.status).toBe(503);
    expect(fields(shed)).toEqual(fields(refused));
    expect(fields(shed)).toMatchObject({ limit: '20', remaining: '0' });
  }, 60_000);
});
