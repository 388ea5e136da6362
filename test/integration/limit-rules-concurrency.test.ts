import { request as httpRequest, type ClientRequest } from 'node:http';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, type Reply } from '../helpers/edge-rules-stack.js';
import { InFlightUpstream } from '../helpers/in-flight-upstream.js';
import { pollUntil } from '../helpers/poll.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, configCopy, createKey, slackRedisTimeout, startGateways, type CreatedKey, type GatewayHandle } from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// `maxConcurrent` on a limit rule (docs/policies.md, "Limit rules"): a rule counting by client
// address caps the requests of that address in flight at once, whatever key sends them, across
// three real gateway processes on one real redis-server, as the upstream itself counts them. The
// slots are tg:slots:{rule:<name>:<digest>}, taken before the quota step and given back when
// the answers end. Each address is its own loopback source address (127.0.0.x).

const PLANS = `
plans:
  free: { perMinute: 100000, perDay: 100000 }
ban: { afterRejections: 3, window: 600, duration: 600 }
`;

const RULES = `limits:
  - { name: reports-per-address, match: { path: /v1/categories }, by: [client.address], maxConcurrent: 3 }
`;

let redis: TestRedis;
let client: Redis;
let upstream: InFlightUpstream;
let gateways: GatewayHandle[];
let configDir: string;

beforeAll(async () => {
  configDir = configCopy({
    'plans.yaml': () => PLANS,
    'gateway.yaml': (text) => slackRedisTimeout(text).replace(/^limits: \[\][^\n]*\n/m, RULES),
  });
  redis = await TestRedis.start();
  client = redis.client();
  upstream = await new InFlightUpstream().start();
  gateways = await startGateways(3, { redisUrl: redis.url, upstreamUrl: upstream.url, configDir });
}, 180_000);

afterAll(async () => {
  await Promise.all((gateways ?? []).map((g) => g.process.stop()));
  client?.disconnect();
  await upstream?.stop();
  await redis?.stop();
});

const deadlineIn = (ms: number) => ({ deadline: Date.now() + ms });

/** The rule's slots alive now on Redis's clock, every address's together. */
async function ruleSlots(): Promise<number> {
  const keys = await client.keys('tg:slots:{rule:reports-per-address:*}');
  const [seconds, micros] = await client.time();
  const nowMs = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  const counts = await Promise.all(keys.map((key) => client.zcount(key, `(${nowMs}`, '+inf')));
  return counts.reduce((a, b) => a + b, 0);
}

/** The minute counts the plan charged, over `keys`. */
async function planCharged(keys: CreatedKey[]): Promise<number> {
  const counts = await Promise.all(keys.map((k) => client.hget(`tg:quota:{${k.id}}`, 'mc')));
  return counts.reduce((sum, c) => sum + Number(c ?? 0), 0);
}

/** One request from `address` through gateway `i % 3`, with key `i % keys.length`. */
function send(keys: CreatedKey[], i: number, address: string, query: string): Promise<Reply> {
  return call(`${gateways[i % gateways.length]!.url}/v1/categories${query}`, {
    headers: bearer(keys[i % keys.length]!.key),
    localAddress: address,
  });
}

describe('maxConcurrent on a limit rule by client address, across three gateways on Redis', () => {
  it('lets at most 3 requests of one address be in flight, whatever key sends them; the rest get 429 and are charged nothing', async () => {
    await awayFromDayEdge(30);
    const keys = await Promise.all([0, 1, 2].map(() => createKey(redis, ['--plan', 'free'], configDir)));
    upstream.resetPeakAll();
    // Twelve at once from one address, with three keys over three gateways, held by the upstream.
    const answers = Array.from({ length: 12 }, (_, i) => send(keys, i, '127.0.0.5', '?hold'));
    const refused: Reply[] = [];
    for (const answer of answers) void answer.then((a) => refused.push(a));
    await pollUntil(
      async () => upstream.inFlightAll + refused.length,
      (n) => n === 12,
      deadlineIn(60_000),
    );
    expect(upstream.inFlightAll).toBe(3);
    expect(upstream.mostInFlightAll).toBe(3);
    expect(refused.map((a) => [a.status, (a.json as { code: string }).code, a.headers['retry-after']])).toEqual(
      Array(9).fill([429, 'too_many_concurrent_requests', '1']),
    );
    expect((refused[0]!.json as { message: string }).message).toContain('"reports-per-address"');
    // The plan's rate-limit headers as they stand, on the refusal too.
    expect(refused[0]!.headers['ratelimit']).toMatch(/^"(minute|day)";r=\d+;t=\d+$/);
    expect(await ruleSlots()).toBe(3);
    // Refused before the quota step: only the three admitted are counted by the plan.
    expect(await planCharged(keys)).toBe(3);

    // Another address has slots of its own meanwhile (the upstream has four in flight then).
    const other = await send(keys, 0, '127.0.0.6', '');
    expect(other.status).toBe(200);

    upstream.answerAll();
    expect((await Promise.all(answers)).filter((a) => a.status === 200)).toHaveLength(3);
    await pollUntil(ruleSlots, (n) => n === 0, deadlineIn(30_000));
    expect(await ruleSlots()).toBe(0);
  });

  it('never lets more than 3 be in flight under many overlapping slow requests, and gives every slot back after', async () => {
    await awayFromDayEdge(30);
    const keys = await Promise.all([0, 1].map(() => createKey(redis, ['--plan', 'free'], configDir)));
    upstream.resetPeakAll();
    const rush = await Promise.all(Array.from({ length: 60 }, (_, i) => send(keys, i, '127.0.0.7', `?hold=${5 + (i % 7) * 3}`)));
    expect(upstream.mostInFlightAll).toBeLessThanOrEqual(3);
    const codes = rush.map((a) => (a.status === 200 ? 'ok' : (a.json as { code: string }).code));
    for (const code of codes) expect(['ok', 'too_many_concurrent_requests']).toContain(code);
    expect(codes).toContain('ok');
    // Every admitted request, and only those, charged the plan.
    expect(await planCharged(keys)).toBe(codes.filter((c) => c === 'ok').length);
    await pollUntil(ruleSlots, (n) => n === 0, deadlineIn(30_000));
    expect(await ruleSlots()).toBe(0);
    // Concurrency refusals count towards no ban: the keys still pass.
    for (const i of [0, 1]) expect((await send(keys, i, '127.0.0.7', '')).status).toBe(200);
  });
  it('a client cannot dodge the cap with X-Forwarded-For, and one that leaves while its request is held gives its slot back', async () => {
    await awayFromDayEdge(30);
    const keys = await Promise.all([0, 1, 2].map(() => createKey(redis, ['--plan', 'free'], configDir)));
    upstream.resetPeakAll();
    // Three held requests from one address, then three more claiming other addresses: the
    // gateways trust no proxy here, so X-Forwarded-For names nobody and all six are one address.
    const held: ClientRequest[] = [];
    const ended: number[] = [];
    for (let i = 0; i < 3; i++) {
      const req = httpRequest(`${gateways[i]!.url}/v1/categories?hold`, { headers: bearer(keys[i]!.key), localAddress: '127.0.0.8' });
      req.on('response', (res) => (ended.push(res.statusCode!), res.resume()));
      req.on('error', () => undefined);
      req.end();
      held.push(req);
    }
    await pollUntil(
      async () => upstream.inFlightAll,
      (n) => n === 3,
      deadlineIn(60_000),
    );
    const lying = await Promise.all(
      [0, 1, 2].map((i) =>
        call(`${gateways[i]!.url}/v1/categories`, {
          headers: { ...bearer(keys[i]!.key), 'x-forwarded-for': `203.0.113.${i + 1}` },
          localAddress: '127.0.0.8',
        }),
      ),
    );
    expect(lying.map((a) => (a.json as { code?: string } | undefined)?.code)).toEqual(Array(3).fill('too_many_concurrent_requests'));
    // The three clients go before any answer: their slots come back without the upstream answering.
    for (const req of held) req.destroy();
    await pollUntil(ruleSlots, (n) => n === 0, deadlineIn(30_000));
    expect(await ruleSlots()).toBe(0);
    expect(ended).toEqual([]);
    expect((await send(keys, 0, '127.0.0.8', '')).status).toBe(200);
    upstream.answerAll();
  });
  // Last: it kills a gateway.
  it('gives the rule slots of a gateway killed with SIGKILL back within 10 s', async () => {
    await awayFromDayEdge(30);
    const keys = await Promise.all([0, 1, 2].map(() => createKey(redis, ['--plan', 'free'], configDir)));
    // All three held through gateway 0; their client connections die with it.
    const held = [0, 1, 2].map((i) =>
      call(`${gateways[0]!.url}/v1/categories?hold`, { headers: bearer(keys[i]!.key), localAddress: '127.0.0.9' }).catch(() => 'cut'),
    );
    await pollUntil(ruleSlots, (n) => n === 3, deadlineIn(60_000));
    expect(((await send(keys, 1, '127.0.0.9', '')).json as { code?: string } | undefined)?.code).toBe('too_many_concurrent_requests');
    const killedAt = Date.now();
    await gateways[0]!.process.stop('SIGKILL');
    expect(await Promise.all(held)).toEqual(['cut', 'cut', 'cut']);
    expect(await ruleSlots()).toBeGreaterThan(0);
    await pollUntil(ruleSlots, (n) => n === 0, { deadline: killedAt + 10_000, everyMs: 100 });
    expect(await ruleSlots()).toBe(0);
    upstream.answerAll();
    expect((await send(keys, 1, '127.0.0.9', '')).status).toBe(200);
  });
});
