import { writeFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { TestRedis } from '../helpers/redis-server.js';
import {
  bearer,
  configCopy,
  createKey,
  getFrom,
  keysCli,
  slackRedisTimeout,
  startGateway,
  type CreatedKey,
  type GatewayHandle,
  testPlans,
} from '../helpers/stack.js';
import { pollUntil } from '../helpers/poll.js';
import { awayFromDayEdge, inOneMinute } from '../helpers/windows.js';

// Quotas counted in one Redis and shared by three real gateway processes.

let redis: TestRedis;
let upstream: EchoUpstream;
let gateways: GatewayHandle[];
let configDir: string;

const PLANS = testPlans(4, { afterRejections: 6, window: 60, duration: 120 });

beforeAll(async () => {
  redis = await TestRedis.start();
  upstream = await new EchoUpstream().start();
  configDir = configCopy({ 'plans.yaml': () => PLANS, 'gateway.yaml': slackRedisTimeout });
  gateways = await Promise.all(
    [1, 2, 3].map(() => startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: upstream.url, TOLLGATE_CONFIG_DIR: configDir })),
  );
});

afterAll(async () => {
  await Promise.all(gateways?.map((g) => g.process.stop()) ?? []);
  await upstream?.stop();
  await redis?.stop();
});

const newKey = (args: string[]) => createKey(redis, args, configDir);

/** One request through gateway `i % 3`. */
function send(key: string, i: number, path = '/v1/categories'): Promise<Response> {
  return fetch(`${gateways[i % gateways.length]!.url}${path}`, { headers: bearer(key) });
}

/**
 * Retry-After counts whole seconds to `resetS` from when the gateway decided, which was somewhere
 * between sending (`sentAtMs`) and the answer (`answeredAtMs`): the bounds come from those two
 * moments, so a slow answer widens them instead of failing the test.
 */
function expectRetryAfterTowards(retryAfter: number, resetS: number, sentAtMs: number, answeredAtMs: number): void {
  expect(retryAfter).toBeGreaterThanOrEqual(Math.floor(resetS - answeredAtMs / 1000) - 1);
  expect(retryAfter).toBeLessThanOrEqual(Math.ceil(resetS - sentAtMs / 1000) + 1);
}

/** Polls replica `i % 3` with `send` until it no longer answers from a lifted ban, and returns its answer. */
async function pastLiftedBan(key: string, i: number): Promise<{ status: number; code: string }> {
  return pollUntil(
    async () => {
      const res = await send(key, i);
      return { status: res.status, code: ((await res.json()) as { code: string }).code };
    },
    (answer) => answer.code !== 'api_key_banned',
    // Far short of the ban's own end (duration: 120 s): an answer past it was the pushed unban.
    { deadline: Date.now() + 30_000 },
  );
}

async function usage(key: CreatedKey) {
  const result = await keysCli(redis, ['usage', key.id, '--json'], configDir);
  expect(result.code).toBe(0);
  return JSON.parse(result.stdout) as {
    minute: { used: number; limit: number };
    day: { used: number; limit: number };
    bannedUntil: string | null;
  };
}

describe('quotas across three replicas', () => {
  it('admit exactly 50 of 200 concurrent requests on a 50/minute plan', async () => {
    await awayFromDayEdge(20);
    const key = await newKey(['--plan', 'fifty']);
    const responses = await Promise.all(Array.from({ length: 200 }, (_, i) => send(key.key, i)));
    const statuses = responses.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(50);
    expect(statuses.filter((s) => s === 429)).toHaveLength(150);
    // (The plan's day is 50 too, so this count survives a minute edge.)
    expect((await usage(key)).day.used).toBe(50);
  });

  it('answers over the minute limit with 429 rate_limit_exceeded, Retry-After and the headers', () =>
    inOneMinute(async () => {
      const key = await newKey(['--plan', 'free', '--per-minute', '4', '--per-day', '100000']);
      for (let i = 0; i < 4; i++) {
        const ok = await send(key.key, i);
        expect(ok.status).toBe(200);
        expect(ok.headers.get('x-ratelimit-limit')).toBe('4');
        expect(ok.headers.get('x-ratelimit-remaining')).toBe(String(3 - i));
      }
      const sentAtMs = Date.now();
      const refused = await send(key.key, 4);
      const answeredAtMs = Date.now();
      expect(refused.status).toBe(429);
      expect(await refused.json()).toEqual({ code: 'rate_limit_exceeded', message: expect.any(String), status: 429 });
      // Retry-After, X-RateLimit-Reset and RateLimit's t name one moment: the end of this minute.
      const retryAfter = Number(refused.headers.get('retry-after'));
      const resetS = Number(refused.headers.get('x-ratelimit-reset'));
      expect(resetS % 60).toBe(0);
      expect(resetS).toBe(Math.ceil(sentAtMs / 60_000) * 60);
      expectRetryAfterTowards(retryAfter, resetS, sentAtMs, answeredAtMs);
      expect(refused.headers.get('x-ratelimit-remaining')).toBe('0');
      expect(refused.headers.get('ratelimit-policy')).toBe('"minute";q=4;w=60, "day";q=100000;w=86400');
      expect(refused.headers.get('ratelimit')).toBe(`"minute";r=0;t=${retryAfter}`);
      // Refusals consumed nothing in either window.
      const used = await usage(key);
      expect(used.minute.used).toBe(4);
      expect(used.day.used).toBe(4);
    }));

  it('puts the rate-limit headers on every kind of response', async () => {
    const key = await newKey(['--plan', 'pro']);
    const check = (res: Response, status: number) => {
      expect(res.status).toBe(status);
      for (const name of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'ratelimit-policy', 'ratelimit']) {
        expect(res.headers.get(name), `${name} on ${status}`).toBeTruthy();
      }
    };
    check(await send(key.key, 0), 200);
    try {
      upstream.behaviour = (_req, res) => {
        res.statusCode = 404;
        res.end('{"code":"not_found","message":"x","status":404}');
      };
      check(await send(key.key, 1), 404);
      upstream.behaviour = (req) => req.socket.destroy();
      check(await send(key.key, 2), 502);
    } finally {
      upstream.behaviour = new EchoUpstream().behaviour;
    }
    check(await fetch(`${gateways[0]!.url}/v1/categories`), 401);
  });

  it('lets the day window bind when the day has fewer requests left than the minute', async () => {
    await awayFromDayEdge(20);
    const key = await newKey(['--plan', 'free', '--per-minute', '10', '--per-day', '12']);
    // Earlier traffic today: 9 of 12 used in previous minutes (written as the store would).
    const client = redis.client();
    const [seconds] = (await client.time()) as [number, number];
    const nowMs = Number(seconds) * 1000;
    await client.hset(`tg:quota:{${key.id}}`, 'ds', nowMs - (nowMs % 86_400_000), 'dc', 9);
    client.disconnect();

    const first = await send(key.key, 0);
    expect(first.status).toBe(200);
    expect(first.headers.get('x-ratelimit-limit')).toBe('12');
    expect(first.headers.get('x-ratelimit-remaining')).toBe('2');
    expect(first.headers.get('ratelimit')).toMatch(/^"day";r=2;t=\d+$/);
    await send(key.key, 1);
    await send(key.key, 2);
    const sentAtMs = Date.now();
    const refused = await send(key.key, 3);
    const answeredAtMs = Date.now();
    expect(refused.status).toBe(429);
    const midnightS = Math.ceil(sentAtMs / 86_400_000) * 86_400;
    expectRetryAfterTowards(Number(refused.headers.get('retry-after')), midnightS, sentAtMs, answeredAtMs);
    // The refused request was not charged: the day holds the 9 earlier and 3 admitted.
    expect((await usage(key)).day.used).toBe(12);
  });

  it('names the day when both windows are used up: headers and Retry-After point at midnight', async () => {
    // Issue 12: with both used up the headers named the minute while Retry-After waited for the day.
    await awayFromDayEdge(20);
    const key = await newKey(['--plan', 'free', '--per-minute', '2', '--per-day', '2']);
    for (let i = 0; i < 2; i++) expect((await send(key.key, i)).status).toBe(200);
    const sentAtMs = Date.now();
    const refused = await send(key.key, 2);
    const answeredAtMs = Date.now();
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers.get('retry-after'));
    const resetS = Number(refused.headers.get('x-ratelimit-reset'));
    expect(resetS % 86_400).toBe(0);
    expectRetryAfterTowards(retryAfter, resetS, sentAtMs, answeredAtMs);
    expect(refused.headers.get('x-ratelimit-limit')).toBe('2');
    expect(refused.headers.get('ratelimit')).toBe(`"day";r=0;t=${retryAfter}`);
  });

  it('bans a key that keeps going after 429, on every replica, until unbanned', async () => {
    // The day as full as the minute: a minute edge during the test changes nothing.
    await awayFromDayEdge(20);
    const key = await newKey(['--plan', 'free', '--per-minute', '4', '--per-day', '4']);
    const codes: string[] = [];
    for (let i = 0; i < 4 + 6 + 3; i++) {
      const res = await send(key.key, i);
      codes.push(res.status === 200 ? 'ok' : ((await res.json()) as { code: string }).code);
      if (i >= 10) {
        const retryAfter = Number(res.headers.get('retry-after'));
        expect(retryAfter).toBeGreaterThan(60);
        expect(retryAfter).toBeLessThanOrEqual(120);
        expect(res.headers.get('x-ratelimit-remaining')).toBe('0');
      }
    }
    // afterRejections: 6, so the 6th refusal is the ban, and every replica answers banned after.
    expect(codes).toEqual([...Array(4).fill('ok'), ...Array(5).fill('rate_limit_exceeded'), ...Array(4).fill('api_key_banned')]);
    expect((await usage(key)).bannedUntil).not.toBeNull();

    const unban = await keysCli(redis, ['unban', key.id], configDir);
    expect(unban.code).toBe(0);
    expect(unban.stdout).toContain('ban lifted');
    // Each replica forgets its cached ban when the unban is pushed to it; until then it answers from
    // memory (no refusal counted), so waiting for it leaves the refusal count as it was.
    for (let i = 0; i < 3; i++) {
      expect(await pastLiftedBan(key.key, i)).toEqual({ status: 429, code: 'rate_limit_exceeded' });
    }
  });

  it('applies per-key quotas, and a quota change at once on every replica', async () => {
    // Day limits equal to the minute's: the counts survive a minute edge.
    await awayFromDayEdge(20);
    const key = await newKey(['--plan', 'free', '--per-minute', '3', '--per-day', '3']);
    const first = await Promise.all([0, 1, 2, 3, 4].map((i) => send(key.key, i)));
    expect(first.filter((r) => r.status === 200)).toHaveLength(3);
    expect(first[0]!.headers.get('ratelimit-policy')).toBe('"minute";q=3;w=60, "day";q=3;w=86400');

    expect((await keysCli(redis, ['set-quota', key.id, '--per-minute', '5', '--per-day', '5'], configDir)).code).toBe(0);
    // Wait for the push on every replica with GET /v1/usage, which counts against no quota.
    const policies = await Promise.all(
      [0, 1, 2].map((i) =>
        pollUntil(
          () => send(key.key, i, '/v1/usage').then((r) => r.headers.get('ratelimit-policy')),
          (policy) => policy === '"minute";q=5;w=60, "day";q=5;w=86400',
          { deadline: Date.now() + 20_000 },
        ),
      ),
    );
    expect(policies).toEqual(Array(3).fill('"minute";q=5;w=60, "day";q=5;w=86400'));
    const more = await Promise.all([0, 1, 2, 3, 4].map((i) => send(key.key, i)));
    expect(more.filter((r) => r.status === 200)).toHaveLength(2);
    expect(more.find((r) => r.status === 200)!.headers.get('x-ratelimit-limit')).toBe('5');
  });

  it('limits failed authentications per client address, with headers on the 401s', () => {
    // The allowance is per minute: a run a minute edge splits is run once more, from a fresh address.
    const addresses = ['127.0.0.7', '127.0.0.9'];
    return inOneMinute(async () => {
      const address = addresses.shift()!;
      const url = (i: number) => `${gateways[i % 3]!.url}/v1/categories`;
      const first = await getFrom(address, url(0), bearer('tg_not_a_key'));
      expect(first.status).toBe(401);
      expect(first.headers['ratelimit-policy']).toBe('"unauthenticated";q=60;w=60');
      const remaining = Number(first.headers['x-ratelimit-remaining']);
      expect(remaining).toBe(59);
      // The allowance is shared by the replicas (counted in Redis): use it up across all three.
      const statuses = await Promise.all(
        Array.from({ length: remaining + 3 }, (_, i) => getFrom(address, url(i), bearer('tg_bad')).then((r) => r.status)),
      );
      expect(statuses.filter((s) => s === 401)).toHaveLength(remaining);
      expect(statuses.filter((s) => s === 429)).toHaveLength(3);
      const limited = await getFrom(address, url(1));
      expect(limited.status).toBe(429);
      expect(JSON.parse(limited.body).code).toBe('too_many_unauthenticated_requests');
      expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(limited.headers['x-ratelimit-remaining']).toBe('0');
      // Another address is not affected.
      expect((await getFrom('127.0.0.8', url(1))).status).toBe(401);
    });
  });
});

describe('plans hot reload', () => {
  it('applies a valid plans.yaml change within seconds, and refuses an invalid one keeping the last good plans', async () => {
    const key = await newKey(['--plan', 'business']);
    const limitOf = async (i: number) => (await send(key.key, i)).headers.get('x-ratelimit-limit');
    expect(await limitOf(0)).toBe('1000');

    const file = join(configDir, 'plans.yaml');
    writeFileSync(file, readFileSync(file, 'utf8').replace('business:   { perMinute: 1000', 'business:   { perMinute: 700'));
    // The file is checked every second; a loaded machine may take longer to notice and reload.
    const deadline = Date.now() + 30_000;
    let limits: Array<string | null>;
    do {
      await new Promise((r) => setTimeout(r, 200));
      limits = await Promise.all([0, 1, 2].map(limitOf));
    } while (limits.some((l) => l !== '700') && Date.now() < deadline);
    expect(limits).toEqual(['700', '700', '700']);

    writeFileSync(file, readFileSync(file, 'utf8').replace('business:   { perMinute: 700', 'business:   { perMinute: -1'));
    for (const g of gateways) await g.process.waitForLog('config reload refused; the previous config stays in force');
    expect(await Promise.all([0, 1, 2].map(limitOf))).toEqual(['700', '700', '700']);
    const refusal = gateways[0]!.process.logs().find((l) => l.msg === 'config reload refused; the previous config stays in force');
    expect(String(refusal!.error)).toContain('plans.yaml: plans.business.perMinute');
  });
});
