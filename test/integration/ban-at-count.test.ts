import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, configCopy, createKey, slackRedisTimeout, startGateway, type GatewayHandle, testPlans } from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// docs/clients.md "Bans": a key is banned at its afterRejections-th refusal counted across all replicas,
// whatever the request rate. Three real gateway processes on one Redis. Each test key has the
// same quota per minute and per day, so its refusals are the day's and a minute edge during the
// test changes nothing (and none starts in the last 20 s before midnight, which would).

const AFTER_REJECTIONS = 4;
let redis: TestRedis;
let upstream: EchoUpstream;
let gateways: GatewayHandle[];
let configDir: string;

beforeAll(async () => {
  redis = await TestRedis.start();
  upstream = await new EchoUpstream().start();
  configDir = configCopy({
    'plans.yaml': () => testPlans(2, { afterRejections: AFTER_REJECTIONS, window: 600, duration: 120 }),
    'gateway.yaml': slackRedisTimeout,
  });
  gateways = await Promise.all(
    [1, 2, 3].map(() => startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: upstream.url, TOLLGATE_CONFIG_DIR: configDir })),
  );
});

afterAll(async () => {
  await Promise.all(gateways?.map((g) => g.process.stop()) ?? []);
  await upstream?.stop();
  await redis?.stop();
});

/** A key that may make 2 requests today (and 2 a minute). */
const usedUpKey = async () => (await createKey(redis, ['--plan', 'free', '--per-minute', '2', '--per-day', '2'], configDir)).key;

/** The answer's code: `ok` for a 200, else the Error body's code. */
async function codeOf(key: string, gateway: number): Promise<string> {
  const res = await fetch(`${gateways[gateway]!.url}/v1/categories`, { headers: bearer(key) });
  if (res.status === 200) {
    await res.arrayBuffer();
    return 'ok';
  }
  return ((await res.json()) as { code: string }).code;
}

const limited = 'rate_limit_exceeded';
const banned = 'api_key_banned';

describe('bans at the configured count', () => {
  beforeEach(() => awayFromDayEdge(20));

  it('one request at a time over three replicas: the 4th refusal is the ban, on every replica after', async () => {
    const key = await usedUpKey();
    const codes: string[] = [];
    for (let i = 0; i < 2 + AFTER_REJECTIONS + 6; i++) codes.push(await codeOf(key, i % 3));
    expect(codes).toEqual(['ok', 'ok', limited, limited, limited, banned, ...Array(6).fill(banned)]);
  });

  it('back to back on one replica: the same count', async () => {
    const key = await usedUpKey();
    const codes: string[] = [];
    for (let i = 0; i < 2 + AFTER_REJECTIONS + 3; i++) codes.push(await codeOf(key, 0));
    expect(codes).toEqual(['ok', 'ok', limited, limited, limited, banned, banned, banned, banned]);
  });

  it('a burst of 90 concurrent requests over three replicas: exactly 3 refusals short of a ban', async () => {
    const key = await usedUpKey();
    const codes = await Promise.all(Array.from({ length: 90 }, (_, i) => codeOf(key, i % 3)));
    const count = (code: string) => codes.filter((c) => c === code).length;
    expect(count('ok')).toBe(2);
    expect(count(limited)).toBe(AFTER_REJECTIONS - 1);
    expect(count(banned)).toBe(90 - 2 - (AFTER_REJECTIONS - 1));
  });

  it('bursts after a used-up key was refused before: the ban still comes at the 4th refusal in all', async () => {
    const key = await usedUpKey();
    expect([await codeOf(key, 0), await codeOf(key, 1), await codeOf(key, 2)]).toEqual(['ok', 'ok', limited]);
    const codes = (await Promise.all([0, 1].map(() => Promise.all(Array.from({ length: 30 }, (_, i) => codeOf(key, i % 3)))))).flat();
    expect(codes.filter((c) => c === limited)).toHaveLength(AFTER_REJECTIONS - 2);
    expect(codes.filter((c) => c === banned)).toHaveLength(60 - (AFTER_REJECTIONS - 2));
  });
});
