import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { TestRedis } from '../helpers/redis-server.js';
import { requestLoops, sleep } from '../helpers/request-loops.js';
import { bearer, configCopy, createKey, startGateway, testPlans, type GatewayHandle } from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// A busy gateway is not a dead Redis. Regression: with Redis healthy, a gateway paused for 400 ms
// (SIGSTOP) and resumed a few times took the replies waiting in its socket for Redis timeouts and
// admitted 17 requests past a key's limit from its local fallback, marked quota-local. Its own
// stalled loop is now told from Redis's slowness: those requests are shed (503 gateway_overloaded,
// Retry-After), never admitted. Shipped command timeout (250 ms); the plan's day equals its minute,
// so a minute edge during the test changes nothing.

const LIMIT = 20;
let redis: TestRedis;
let upstream: EchoUpstream;
let gateway: GatewayHandle;
let configDir: string;

beforeAll(async () => {
  redis = await TestRedis.start();
  upstream = await new EchoUpstream().start();
  // Refusals never end in a ban here: the test counts admissions past the limit.
  configDir = configCopy({ 'plans.yaml': () => testPlans(LIMIT, { afterRejections: 1_000_000, window: 60, duration: 60 }) });
  gateway = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: upstream.url, TOLLGATE_CONFIG_DIR: configDir });
});

afterAll(async () => {
  if (gateway) process.kill(gateway.process.pid, 'SIGCONT');
  await gateway?.process.stop();
  await upstream?.stop();
  await redis?.stop();
});

describe('a gateway paused and resumed while a key sits at its limit', () => {
  it('admits nothing past the limit and never counts locally', async () => {
    await awayFromDayEdge(120);
    const key = await createKey(redis, ['--plan', 'tiny'], configDir);
    for (let i = 0; i < LIMIT; i++) {
      const res = await fetch(`${gateway.url}/v1/categories`, { headers: bearer(key.key) });
      expect(res.status).toBe(200);
    }
    const loops = requestLoops([gateway.url], key.key, 8);
    for (let i = 0; i < 5; i++) {
      await sleep(300);
      process.kill(gateway.process.pid, 'SIGSTOP');
      await sleep(400);
      process.kill(gateway.process.pid, 'SIGCONT');
    }
    await sleep(500);
    const tally = await loops.stop();
    console.log(
      `paused gateway: ${[...tally.statuses].map(([s, n]) => `${n}×${s}`).join(', ')}; degraded ${JSON.stringify(Object.fromEntries(tally.degraded))}`,
    );
    expect(tally.unanswered).toBe(0);
    expect(tally.statuses.get(200) ?? 0).toBe(0);
    expect(tally.degraded.size).toBe(0);
    expect([...tally.statuses.keys()].every((status) => status === 429 || status === 503)).toBe(true);
    const client = redis.client();
    try {
      expect(Number(await client.hget(`tg:quota:{${key.id}}`, 'dc'))).toBe(LIMIT);
    } finally {
      client.disconnect();
    }
  }, 120_000);
});
