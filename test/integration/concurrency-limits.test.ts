import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { InFlightUpstream } from '../helpers/in-flight-upstream.js';
import { pollUntil } from '../helpers/poll.js';
import { TestRedis } from '../helpers/redis-server.js';
import {
  bearer,
  configCopy,
  createKey,
  keysCli,
  slackRedisTimeout,
  startGateways,
  type CreatedKey,
  type GatewayHandle,
} from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// maxConcurrent: requests and WebSocket tunnels in flight per consumer, across three gateway
// processes on one real redis-server, as the upstream itself counts them. Slots are leased
// (tg:slots:{id}, renewed by their replica), so a killed replica's slots come back on their own.

const PLANS = `
plans:
  free:   { perMinute: 1000, perDay: 100000 }
  slots3: { perMinute: 1000, perDay: 100000, maxConcurrent: 3 }
  team:   { perMinute: 1000, perDay: 100000, maxConcurrent: 2, scope: owner }
ban: { afterRejections: 3, window: 600, duration: 600 }
`;

let redis: TestRedis;
let client: Redis;
let upstream: InFlightUpstream;
let gateways: GatewayHandle[];
let configDir: string;

beforeAll(async () => {
  configDir = configCopy({ 'plans.yaml': () => PLANS, 'gateway.yaml': slackRedisTimeout });
  redis = await TestRedis.start();
  client = redis.client();
  upstream = await new InFlightUpstream().start();
  gateways = await startGateways(3, { redisUrl: redis.url, upstreamUrl: upstream.url, configDir });
}, 180_000);

afterAll(async () => {
  await Promise.all(gateways.map((g) => g.process.stop()));
  client?.disconnect();
  await upstream?.stop();
  await redis?.stop();
});

const newKey = (args: string[]) => createKey(redis, args, configDir);
/** Slots alive now on Redis's clock (an ended one stays in the set until the next take prunes it). */
async function slots(subject: string): Promise<number> {
  const [seconds, micros] = await client.time();
  return client.zcount(`tg:slots:{${subject}}`, `(${Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)}`, '+inf');
}
const deadlineIn = (ms: number) => ({ deadline: Date.now() + ms });

/** Every slot of `subject` given back (released asynchronously, after its answer). */
async function slotsBack(subject: string): Promise<void> {
  await pollUntil(
    () => slots(subject),
    (n) => n === 0,
    deadlineIn(30_000),
  );
  expect(await slots(subject)).toBe(0);
}

/** One request through gateway `i % 3`, resolved with its status, code and Retry-After. */
async function send(key: CreatedKey, i: number, query = '', signal?: AbortSignal) {
  const res = await fetch(`${gateways[i % gateways.length]!.url}/v1/categories${query}`, { headers: bearer(key.key), signal });
  const body = (await res.json()) as { code?: string };
  return { status: res.status, code: body.code ?? 'ok', retryAfter: res.headers.get('retry-after'), limit: res.headers.get('ratelimit') };
}

describe('maxConcurrent across three gateways on Redis', () => {
  it('never lets more than maxConcurrent of one key be in flight at the upstream; the rest get 429 too_many_concurrent_requests', async () => {
    await awayFromDayEdge(30);
    const key = await newKey(['--plan', 'slots3']);
    // Twelve at once, held by the upstream: exactly three get through, nine are refused.
    const answers = Array.from({ length: 12 }, (_, i) => send(key, i, '?hold'));
    const refused: Array<Awaited<ReturnType<typeof send>>> = [];
    for (const answer of answers) void answer.then((a) => refused.push(a));
    await pollUntil(
      async () => upstream.inFlight(key.id) + refused.length,
      (n) => n === 12,
      deadlineIn(60_000),
    );
    expect(upstream.inFlight(key.id)).toBe(3);
    expect(refused.map((a) => [a.status, a.code, a.retryAfter])).toEqual(Array(9).fill([429, 'too_many_concurrent_requests', '1']));
    // Rate-limit headers as usual on the refusal.
    expect(refused[0]!.limit).toMatch(/^"minute";r=\d+;t=\d+$/);
    expect(await slots(key.id)).toBe(3);
    // A refusal for concurrency is charged nothing: only the three admitted are counted.
    expect(await client.hget(`tg:quota:{${key.id}}`, 'mc')).toBe('3');
    upstream.answerAll();
    expect((await Promise.all(answers)).filter((a) => a.status === 200)).toHaveLength(3);
    await slotsBack(key.id);

    // Many overlapping slow requests, answered at their own pace: the count never passes three.
    const rush = await Promise.all(Array.from({ length: 60 }, (_, i) => send(key, i, `?hold=${5 + (i % 7) * 3}`)));
    expect(upstream.mostInFlight(key.id)).toBeLessThanOrEqual(3);
    for (const a of rush) expect(['ok', 'too_many_concurrent_requests']).toContain(a.code);
    // Concurrency refusals count towards no ban (three refusals would be one here).
    expect((await send(key, 0)).status).toBe(200);
    await slotsBack(key.id);
  });

  it('takes no slot for a request the minute window refuses', async () => {
    await awayFromDayEdge(30);
    const key = await newKey(['--plan', 'slots3', '--per-minute', '2', '--per-day', '2']);
    const held = [send(key, 0, '?hold'), send(key, 1, '?hold')];
    await pollUntil(
      async () => upstream.inFlight(key.id),
      (n) => n === 2,
      deadlineIn(30_000),
    );
    const third = await send(key, 2);
    expect([third.status, third.code]).toEqual([429, 'rate_limit_exceeded']);
    expect(await slots(key.id)).toBe(2);
    upstream.answerAll();
    await Promise.all(held);
  });

  it('gives the slot back when the client aborts, when the upstream fails, and holds one for a WebSocket tunnel until it closes', async () => {
    await awayFromDayEdge(30);
    // The key's own limit, set and shown by the CLI (a plan without one).
    const key = await newKey(['--plan', 'free', '--max-concurrent', '3']);
    const set = await keysCli(redis, ['set-quota', key.id, '--max-concurrent', '1', '--json'], configDir);
    expect(JSON.parse(set.stdout)).toMatchObject({ id: key.id, maxConcurrent: 1 });
    expect(JSON.parse((await keysCli(redis, ['show', key.id, '--json'], configDir)).stdout)).toMatchObject({ maxConcurrent: 1 });

    // A client that goes mid-request.
    const abort = new AbortController();
    const gone = send(key, 0, '?hold', abort.signal).catch(() => 'aborted');
    await pollUntil(
      async () => upstream.inFlight(key.id),
      (n) => n === 1,
      deadlineIn(30_000),
    );
    expect((await send(key, 1)).code).toBe('too_many_concurrent_requests');
    abort.abort();
    expect(await gone).toBe('aborted');
    await slotsBack(key.id);
    expect((await send(key, 1)).status).toBe(200);

    // An upstream that drops the connection: 502, and the slot back.
    expect((await send(key, 2, '?fail')).status).toBe(502);
    await slotsBack(key.id);
    expect((await send(key, 2)).status).toBe(200);

    // A tunnel holds its slot while open.
    const ws = new WebSocket(`${gateways[0]!.url.replace('http', 'ws')}/v1/categories`, { headers: bearer(key.key) });
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    expect(await slots(key.id)).toBe(1);
    expect((await send(key, 1)).code).toBe('too_many_concurrent_requests');
    const echoed = new Promise((resolve) => ws.once('message', (data) => resolve(String(data))));
    ws.send('ping');
    expect(await echoed).toBe('echo:ping');
    ws.close();
    await slotsBack(key.id);
    expect((await send(key, 1)).status).toBe(200);
  });

  it("counts an owner's keys together under a scope: owner plan", async () => {
    await awayFromDayEdge(30);
    const [a, b] = await Promise.all([newKey(['--plan', 'team', '--owner', 'conc']), newKey(['--plan', 'team', '--owner', 'conc'])]);
    const held = [send(a, 0, '?hold'), send(b, 1, '?hold')];
    await pollUntil(
      async () => upstream.inFlight(a.id) + upstream.inFlight(b.id),
      (n) => n === 2,
      deadlineIn(30_000),
    );
    expect((await send(a, 2)).code).toBe('too_many_concurrent_requests');
    expect((await send(b, 0)).code).toBe('too_many_concurrent_requests');
    expect(await slots('owner:conc')).toBe(2);
    upstream.answerAll();
    await Promise.all(held);
    await slotsBack('owner:conc');
  });

  // Last: it kills a gateway.
  it('gives the slots of a gateway killed with SIGKILL back within 10 s', async () => {
    await awayFromDayEdge(30);
    const key = await newKey(['--plan', 'slots3']);
    // Their client connections die with the gateway.
    const held = [0, 1, 2].map(() => send(key, 0, '?hold').catch(() => 'cut'));
    await pollUntil(
      async () => upstream.inFlight(key.id),
      (n) => n === 3,
      deadlineIn(30_000),
    );
    expect((await send(key, 1)).code).toBe('too_many_concurrent_requests');
    const killedAt = Date.now();
    await gateways[0]!.process.stop('SIGKILL');
    expect(await Promise.all(held)).toEqual(['cut', 'cut', 'cut']);
    expect(await slots(key.id)).toBeGreaterThan(0);
    await pollUntil(
      () => slots(key.id),
      (n) => n === 0,
      { deadline: killedAt + 10_000, everyMs: 100 },
    );
    expect(await slots(key.id)).toBe(0);
    expect((await send(key, 1)).status).toBe(200);
  });
});
