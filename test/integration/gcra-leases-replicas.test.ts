import { describe, expect, it } from 'vitest';
import type { Quota } from '../../src/config/plans-schema.js';
import { hammer, leasedRequests, withLeases, worstSpans, type Answer } from '../helpers/gcra-leases.js';
import { quotaStack } from '../helpers/quota-stack.js';
import { keysCli } from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// gcra leases (src/quota/quota-leases.ts, rules 7 to 9) with three real gateway processes on one
// real redis-server: one gcra key hammered far over its rate through all three, in rushes that
// fill its bucket and pauses that empty it, so that each rush starts on fresh leases. What the
// client saw admitted keeps GCRA's promise in every span (at most limit in any 60 s).
// (The exact maths, on an injected clock: gcra-leases-maths.test.ts.)

const PLANS = `
plans:
  smooth: { perMinute: 1200, perDay: 1000000, algorithm: gcra, burst: 50 }
ban: { afterRejections: 1000000, window: 60, duration: 60 }
`;
/** T = 52,129 µs, τ = 50 T ≈ 2.6 s: room for blocks of up to 13 (rule 7), a pause of 3 s empties it. */
const SMOOTH: Quota = { perMinute: 1200, perDay: 1_000_000, algorithm: 'gcra', burst: 50 };
const stack = quotaStack(PLANS, withLeases);

describe('gcra leases across three gateways', { timeout: 120_000 }, () => {
  it('admit no more than GCRA allows in any span, leases and all', async () => {
    await awayFromDayEdge(60);
    const key = await stack.newKey(['--plan', 'smooth']);
    const before = await leasedRequests(stack);
    const answers: Answer[] = [];
    for (let rush = 0; rush < 4; rush++) {
      const endsMs = Date.now() + 2500;
      answers.push(...(await hammer(stack, key.key, () => Date.now() > endsMs)));
      await new Promise((r) => setTimeout(r, 3000));
    }
    const admitted = answers.filter((a) => a.status === 200).length;
    const refused = answers.filter((a) => a.status === 429).length;
    expect(admitted + refused).toBe(answers.length);
    const { excess, most60s } = worstSpans(answers, SMOOTH);
    expect(excess).toBeLessThanOrEqual(0);
    expect(most60s).toBeLessThanOrEqual(SMOOTH.perMinute);
    // Over the rate (some refused), and leases admitted some of it.
    expect(refused).toBeGreaterThan(0);
    expect(await leasedRequests(stack)).toBeGreaterThan(before);
    // Every admitted request was counted in Redis, and leases still out when the load stopped
    // give their day units back as they end: the day comes down to exactly what was admitted.
    const dayUsed = async () =>
      (JSON.parse((await keysCli(stack.redis(), ['usage', key.id, '--json'], stack.configDir())).stdout) as { day: { used: number } }).day
        .used;
    let used = await dayUsed();
    expect(used).toBeGreaterThanOrEqual(admitted);
    for (let polls = 0; used !== admitted && polls < 100; polls++) used = await dayUsed();
    expect(used).toBe(admitted);
  });
});
