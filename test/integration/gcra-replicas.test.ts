import { describe, expect, it } from 'vitest';
import { quotaStack } from '../helpers/quota-stack.js';
import { bearer, keysCli } from '../helpers/stack.js';

// algorithm: gcra (src/quota/gcra.ts) through real processes: three gateways sharing one Redis
// admit exactly the burst of a concurrent rush, and every refusal names one moment in Retry-After,
// X-RateLimit-Reset and RateLimit; `tollgate up` on the embedded store answers the same. gcra's
// minute has no UTC edges: where in the minute a test runs does not matter (its day is the UTC day,
// here far from spent). (The 60-second promise across edges, the UTC-day budget and the exact
// waits are shown on an injected clock in test/unit/gcra.test.ts and, for memory and Redis alike,
// in quota-stores-differential.test.ts.)

const PLANS = `
plans:
  smooth: { perMinute: 6, perDay: 1000, algorithm: gcra, burst: 3 }
ban: { afterRejections: 1000, window: 60, duration: 60 }
`;
const stack = quotaStack(PLANS);
const INTERVAL_S = 60 / (6 - 3 + 1);

function expectRefusalHeaders(res: Response) {
  expect(res.status).toBe(429);
  const retryAfter = Number(res.headers.get('retry-after'));
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(INTERVAL_S);
  expect(res.headers.get('x-ratelimit-limit')).toBe('6');
  expect(res.headers.get('x-ratelimit-remaining')).toBe('0');
  expect(res.headers.get('ratelimit')).toBe(`"minute";r=0;t=${retryAfter}`);
  expect(res.headers.get('ratelimit-policy')).toBe('"minute";q=6;w=60, "day";q=1000;w=86400');
  // Reset is the same moment, in Unix seconds (rounded up on both sides, so within a second).
  expect(Math.abs(Number(res.headers.get('x-ratelimit-reset')) - Date.now() / 1000 - retryAfter)).toBeLessThanOrEqual(1.5);
}

describe('gcra across three replicas on Redis', () => {
  it('admits exactly the burst of 30 concurrent requests, and tells each refusal when the next one gets in', async () => {
    const key = await stack.newKey(['--plan', 'smooth']);
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => stack.send(key.key, i)));
    const admitted = answers.filter((r) => r.status === 200);
    expect(admitted).toHaveLength(3);
    expect(admitted.map((r) => r.headers.get('x-ratelimit-remaining')).sort()).toEqual(['0', '1', '2']);
    for (const refused of answers.filter((r) => r.status !== 200)) expectRefusalHeaders(refused);
    const usage = JSON.parse((await keysCli(stack.redis(), ['usage', key.id, '--json'], stack.configDir())).stdout);
    expect(usage.day.used).toBe(3);
  });
});

describe('gcra on the embedded store', () => {
  it('behaves the same in `tollgate up`', async () => {
    const { url, keyOf } = stack.embedded();
    const key = keyOf('smooth');
    const answers = [];
    for (let i = 0; i < 5; i++) answers.push(await fetch(`${url}/v1/categories`, { headers: bearer(key) }));
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 429, 429]);
    expect(answers.slice(0, 3).map((r) => r.headers.get('x-ratelimit-remaining'))).toEqual(['2', '1', '0']);
    for (const refused of answers.slice(3)) expectRefusalHeaders(refused);
  });
});
