import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, preflight, type Reply } from '../helpers/cors-stack.js';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { TestRedis } from '../helpers/redis-server.js';
import { CONFIG_DIR } from '../helpers/processes.js';
import { configCopy, slackRedisTimeout, startGateway, type GatewayHandle } from '../helpers/stack.js';

/**
 * CORS preflights have a budget of their own per client address (`cors.preflightsPerMinute`),
 * apart from the failed-authentication limit (`unauthenticated.perMinute`, the shipped 60 here).
 * Regression: preflights counted under the failed-auth limit, so an office behind one NAT address
 * got 429 on its 61st preflight of a minute (pages broke), and its preflights used up the limit
 * meant for its failed authentications. Two real gateways share one real redis-server; each test
 * sends from its own loopback address, so no two tests share a count.
 */
const APP = 'https://app.example';

let redis: TestRedis;
let upstream: EchoUpstream;
let a: GatewayHandle;
let b: GatewayHandle;
let configDir: string;

const gatewayYaml = (target: string, tightBudget: number) => (shipped: string) =>
  slackRedisTimeout(shipped).replace(
    /^services: \[\].*$/m,
    `services:
  - name: tight
    paths: [/v1/tight]
    targets: [${target}]
    cors: { origins: [${APP}], preflightsPerMinute: ${tightBudget} }
`,
  ) + `\ncors:\n  origins: [${APP}]\n`;

beforeAll(async () => {
  redis = await TestRedis.start();
  upstream = await new EchoUpstream().start();
  configDir = configCopy({ 'gateway.yaml': gatewayYaml(upstream.url, 5) });
  const env = { REDIS_URL: redis.url, UPSTREAM_URL: upstream.url, TOLLGATE_CONFIG_DIR: configDir };
  [a, b] = await Promise.all([startGateway(env), startGateway(env)]);
}, 90_000);

afterAll(async () => {
  await Promise.all([a?.process.stop(), b?.process.stop()]);
  await upstream?.stop();
  await redis?.stop();
});

const top = (gateway: GatewayHandle, from: string) => preflight(`${gateway.url}/v1/categories`, APP, 'GET', 'authorization', from);
const tight = (gateway: GatewayHandle, from: string) => preflight(`${gateway.url}/v1/tight/x`, APP, 'GET', 'authorization', from);
const keyless = (gateway: GatewayHandle, from: string) => call(`${gateway.url}/v1/categories`, { headers: { origin: APP }, from });
const rateLimitFields = (reply: Reply) => Object.keys(reply.headers).filter((name) => /ratelimit/.test(name));

async function statusesOf(count: number, send: () => Promise<Reply>): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < count; i++) statuses.push((await send()).status);
  return statuses;
}

describe('the preflight budget', () => {
  it('by default (600 a minute): 100 preflights from one address are all 204, without rate-limit fields, and its failed-auth count is untouched', async () => {
    const from = '127.0.0.51';
    const replies: Reply[] = [];
    for (let i = 0; i < 100; i++) replies.push(await top(a, from));
    expect(replies.map((r) => r.status)).toEqual(Array(100).fill(204));
    expect(replies.flatMap(rateLimitFields)).toEqual([]);
    // The address's first failed authentication: 59 of the shipped 60 left.
    const unauthenticated = await keyless(a, from);
    expect(unauthenticated.status).toBe(401);
    expect(unauthenticated.headers['x-ratelimit-remaining']).toBe('59');
  });

  it('past a service’s budget (5): 429 too_many_preflights with Retry-After and the CORS fields; other addresses and budgets untouched', async () => {
    const from = '127.0.0.52';
    expect(await statusesOf(5, () => tight(a, from))).toEqual([204, 204, 204, 204, 204]);
    const refused = await tight(a, from);
    expect(refused.status).toBe(429);
    expect(JSON.parse(refused.body)).toMatchObject({ code: 'too_many_preflights', status: 429 });
    const retryAfter = Number(refused.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(refused.headers['access-control-allow-origin']).toBe(APP);
    expect(refused.headers['access-control-expose-headers']).toMatch(/Retry-After/);
    expect(rateLimitFields(refused)).toEqual([]);
    // Another address has its own budget; the top-level section (600) its own counter.
    expect((await tight(a, '127.0.0.53')).status).toBe(204);
    expect((await top(a, from)).status).toBe(204);
  });

  it('preflights past the budget do not count as failed authentications: a keyless request from that address is 401, not 429', async () => {
    const from = '127.0.0.54';
    expect(await statusesOf(8, () => tight(a, from))).toEqual([204, 204, 204, 204, 204, 429, 429, 429]);
    const unauthenticated = await keyless(a, from);
    expect(unauthenticated.status).toBe(401);
    expect(unauthenticated.headers['x-ratelimit-remaining']).toBe('59');
  });

  it('60 failed authentications, and the 429s after them, do not block preflights from that address', async () => {
    const from = '127.0.0.55';
    const statuses = await statusesOf(61, () => keyless(a, from));
    expect(statuses).toEqual([...Array(60).fill(401), 429]);
    const blocked = await keyless(a, from);
    expect(JSON.parse(blocked.body).code).toBe('too_many_unauthenticated_requests');
    expect((await top(a, from)).status).toBe(204);
    expect((await tight(a, from)).status).toBe(204);
  });

  it('is shared by the gateways on one Redis: 3 preflights through one and 2 through the other use it up on both', async () => {
    const from = '127.0.0.56';
    expect(await statusesOf(3, () => tight(a, from))).toEqual([204, 204, 204]);
    expect(await statusesOf(2, () => tight(b, from))).toEqual([204, 204]);
    expect((await tight(b, from)).status).toBe(429);
    expect((await tight(a, from)).status).toBe(429);
  });

  it('is hot with gateway.yaml: a reload to 2 a minute refuses the third preflight', async () => {
    const reloads = () => a.process.logs().filter((l) => l.msg === 'config reloaded' && String(l.file).endsWith('gateway.yaml')).length;
    const before = reloads();
    const path = join(configDir, 'gateway.yaml');
    // Written aside and renamed over: the gateway's poll never reads half a file.
    const shipped = readFileSync(join(CONFIG_DIR, 'gateway.yaml'), 'utf8');
    writeFileSync(`${path}.next`, gatewayYaml(upstream.url, 2)(shipped));
    renameSync(`${path}.next`, path);
    await expect.poll(reloads, { timeout: 60_000, interval: 50 }).toBeGreaterThan(before);
    expect(await statusesOf(3, () => tight(a, '127.0.0.57'))).toEqual([204, 204, 429]);
  });

  it('with Redis gone, each gateway still bounds preflights in memory', async () => {
    await redis.kill();
    const from = '127.0.0.58';
    expect(await statusesOf(4, () => tight(a, from))).toEqual([204, 204, 429, 429]);
    expect((await top(a, from)).status).toBe(204);
  });
});
