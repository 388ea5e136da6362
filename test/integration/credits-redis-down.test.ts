import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, configCopy, createKey, keysCli, startGateway, type GatewayHandle } from '../helpers/stack.js';

// A plan with prepaid credits while Redis is unreachable: the balance lives in Redis and cannot be
// spent safely without it, so its keys are answered 503 rate_limit_store_unavailable in the
// degraded `local` mode (the shipped one), while a plan without credits is served from the local
// share as usual.

const PLANS = `
plans:
  prepaid: { perMinute: 1000, perDay: 100000, credits: required }
  plain:   { perMinute: 1000, perDay: 100000 }
ban:
  afterRejections: 20
  window: 60
  duration: 60
`;

let redis: TestRedis;
let upstream: EchoUpstream;
let gateway: GatewayHandle;
let configDir: string;

beforeAll(async () => {
  configDir = configCopy({ 'plans.yaml': () => PLANS });
  redis = await TestRedis.start();
  upstream = await new EchoUpstream().start();
  gateway = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: upstream.url, TOLLGATE_CONFIG_DIR: configDir });
});

afterAll(async () => {
  await gateway?.process.stop();
  await upstream?.stop();
  await redis?.stop();
});

describe('credits while Redis is down', () => {
  it('refuses a credits plan with 503 rate_limit_store_unavailable; a plain plan is served locally', async () => {
    const prepaid = await createKey(redis, ['--plan', 'prepaid'], configDir);
    const plain = await createKey(redis, ['--plan', 'plain'], configDir);
    expect((await keysCli(redis, ['credits', 'add', prepaid.id, '10', '--reason', 'test'], configDir)).code).toBe(0);
    const send = (key: string) => fetch(`${gateway.url}/v1/categories`, { headers: bearer(key) });
    // Both keys validated (and cached) while Redis is up.
    const up = await send(prepaid.key);
    expect([up.status, up.headers.get('tollgate-credits-remaining')]).toEqual([200, '9']);
    expect((await send(plain.key)).status).toBe(200);

    await redis.kill();
    const down = await send(prepaid.key);
    expect(down.status).toBe(503);
    expect(await down.json()).toMatchObject({ code: 'rate_limit_store_unavailable', status: 503 });
    const local = await send(plain.key);
    expect(local.status).toBe(200);
    expect(local.headers.get('x-tollgate-degraded')).toBe('quota-local');
    // Asked again once the gateway knows Redis is down (the breaker open): still refused.
    expect((await send(prepaid.key)).status).toBe(503);
  });
});
