import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { quotaStack } from '../helpers/quota-stack.js';
import { bearer, keysCli } from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// gateway.yaml routes.costs: a matching request consumes `cost` units of both windows, a request
// whose cost does not fit is refused without consuming, headers count units, and a changed cost
// is in force after a reload. Three gateways on one Redis, and `tollgate up` on the embedded
// store. Every key's day is as small as its minute, so a minute edge changes nothing.

const PLANS = `
plans:
  costly: { perMinute: 10, perDay: 10 }
  fifty:  { perMinute: 50, perDay: 50 }
ban: { afterRejections: 100, window: 60, duration: 60 }
`;
const COSTS = `  costs:
    - { method: GET, path: "/v1/search/{kind}", cost: 4 }`;
const stack = quotaStack(PLANS, (yaml) => yaml.replace(/^ {2}costs: \[\].*$/m, COSTS));

const remaining = (res: Response) => Number(res.headers.get('x-ratelimit-remaining'));

/** The shared scenario on a 10-unit key: two searches (4 each), a refused one, then a 1-unit request. */
async function searchesThenRefusal(send: (i: number, path: string) => Promise<Response>) {
  const first = await send(0, '/v1/search/pets');
  const second = await send(1, '/v1/search/cats?q=1');
  expect([first.status, second.status]).not.toContain(429);
  expect([remaining(first), remaining(second)]).toEqual([6, 2]);
  const refused = await send(2, '/v1/search/dogs');
  expect(refused.status).toBe(429);
  expect((await refused.json()).code).toBe('rate_limit_exceeded');
  // Nothing consumed: 2 units are left, reported as such; only midnight lets 4 units through.
  expect(remaining(refused)).toBe(2);
  expect(refused.headers.get('ratelimit')).toMatch(/^"day";r=2;t=\d+$/);
  const secondsToMidnight = Math.ceil((86_400_000 - (Date.now() % 86_400_000)) / 1000);
  expect(Math.abs(Number(refused.headers.get('retry-after')) - secondsToMidnight)).toBeLessThanOrEqual(2);
  const cheap = await send(0, '/v1/categories');
  expect(cheap.status).not.toBe(429);
  expect(remaining(cheap)).toBe(1);
}

describe('route costs across three replicas on Redis', () => {
  it('consume the cost in units, refuse without consuming what does not fit, and count units in the headers', async () => {
    await awayFromDayEdge(20);
    const key = await stack.newKey(['--plan', 'costly']);
    await searchesThenRefusal((i, path) => stack.send(key.key, i, path));
    const usage = JSON.parse((await keysCli(stack.redis(), ['usage', key.id, '--json'], stack.configDir())).stdout);
    expect(usage.day).toMatchObject({ used: 9, limit: 10 });
  });

  it('admit exactly what fits of 30 concurrent 4-unit requests on a 50-unit key, then the rest in 1-unit requests', async () => {
    await awayFromDayEdge(20);
    const key = await stack.newKey(['--plan', 'fifty']);
    const costly = await Promise.all(Array.from({ length: 30 }, (_, i) => stack.send(key.key, i, '/v1/search/x')));
    expect(costly.filter((r) => r.status !== 429)).toHaveLength(12);
    const cheap = await Promise.all(Array.from({ length: 6 }, (_, i) => stack.send(key.key, i)));
    expect(cheap.filter((r) => r.status !== 429)).toHaveLength(2);
  });
});

describe('route costs on the embedded store', () => {
  it('behave the same in `tollgate up`', async () => {
    await awayFromDayEdge(20);
    const { url, keyOf } = stack.embedded();
    const key = keyOf('costly');
    await searchesThenRefusal((_i, path) => fetch(`${url}${path}`, { headers: bearer(key) }));
  });
});

// Last: it changes the shared config file for good.
describe('route costs after a reload', () => {
  it('apply a changed cost after gateway.yaml is reloaded, on every replica', async () => {
    await awayFromDayEdge(20);
    const file = join(stack.configDir(), 'gateway.yaml');
    writeFileSync(file, readFileSync(file, 'utf8').replace('cost: 4 }', 'cost: 2 }'));
    await Promise.all(stack.gateways().map((g) => g.process.waitForLog('config reloaded')));
    const key = await stack.newKey(['--plan', 'costly']);
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(remaining(await stack.send(key.key, i, '/v1/search/pets')));
    expect(answers).toEqual([8, 6, 4]);
  });
});
