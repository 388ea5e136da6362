import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import type { RuleCharge } from '../../src/quota/limit-rules.js';
import { MemoryQuotaStore } from '../../src/store/memory/memory-quota-store.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { MemoryUsage } from '../../src/store/memory/memory-usage.js';
import { RedisUsageReader } from '../../src/store/redis/redis-usage-reader.js';
import type { RulesOutcome } from '../../src/store/quota-store.js';
import { redisForFile } from '../helpers/redis-for-file.js';
import { usageRows } from '../helpers/usage-rows.js';
import { ruleCharge } from '../helpers/rule-charges.js';
import { sansMoveNo } from '../helpers/sans-move-no.js';

// The runs of RULES_QUOTA_SCRIPT (one plan step per run of requests whose rules all fit) against
// the memory store, one request after another, on what limit-rules-differential.test.ts leaves
// out: requests of one call with different costs, a ban reached within a call, a plan spending
// prepaid credits, a shadow plan. Every answer identical, and the balance falls by the costs of
// the admitted requests of a credits plan, exactly once each. Each key's usage rows (the export's
// hours) equal too.

const redis = redisForFile();

const T0 = Date.UTC(2026, 10, 22, 10, 0, 10);
const ban: BanPolicy = { afterRejections: 2, window: 60, duration: 30 };
const plans: Quota[] = [
  { perMinute: 8, perDay: 30 },
  { perMinute: 20, perDay: 25, algorithm: 'gcra', burst: 4 },
  { perMinute: 50, perDay: 100, credits: 'required' },
  { perMinute: 4, perDay: 10, shadow: true },
];

const rule = ruleCharge;
const USAGE_RETENTION_MS = 400 * 86_400_000;

const RULES: RuleCharge[] = [
  rule('per-second', 3, 1000, false, 1, 'a'),
  rule('per-minute', 6, 60_000, false, 2, 'b'),
  rule('cell-rate', 6, 60_000, true, 1, 'c'),
];

const step = fc.record({
  plan: fc.integer({ min: 0, max: plans.length - 1 }),
  // One call's requests: each its cost and the rules it matches.
  burst: fc.array(fc.record({ cost: fc.integer({ min: 1, max: 3 }), rules: fc.subarray([0, 1, 2], { minLength: 1 }) }), {
    minLength: 1,
    maxLength: 6,
  }),
  advanceMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 900 }), fc.integer({ min: 10_000, max: 70_000 })),
});

let run = 0;

describe('limit rules in runs: memory store and Redis script', () => {
  it('agree with mixed costs, bans, credits and shadow plans; credits spent once per admitted request', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 30 }), fc.integer({ min: 0, max: 12 }), async (steps, balance) => {
        run++;
        const clock = { nowMs: T0 + run * 86_400_000 * 3 };
        const usage = new MemoryUsage(USAGE_RETENTION_MS);
        const memory = new MemoryQuotaStore(() => clock.nowMs, usage);
        const shared = new RedisQuotaStore(redis.client(), () => clock.nowMs, USAGE_RETENTION_MS);
        // One key per plan: a key's plan does not change under it.
        for (const p of plans.keys()) {
          await memory.changeCredits(`x${run}p${p}`, { set: balance });
          await shared.changeCredits(`x${run}p${p}`, { set: balance });
        }
        for (const s of steps) {
          clock.nowMs += s.advanceMs;
          const keyId = `x${run}p${s.plan}`;
          const plan = plans[s.plan]!;
          const calls = s.burst.map((b) => ({
            cost: b.cost,
            rules: b.rules.map((i) => ({ ...RULES[i]!, digest: `${run}-${RULES[i]!.digest}` })),
          }));
          const expected: RulesOutcome[] = [];
          for (const c of calls) expected.push(await memory.consumeRules(keyId, plan, ban, c.cost, c.rules));
          const before = (await shared.changeCredits(keyId, {})).after;
          const answers = await Promise.all(calls.map((c) => shared.consumeRules(keyId, plan, ban, c.cost, c.rules)));
          expect(answers.map(sansMoveNo)).toEqual(expected.map(sansMoveNo));
          if (plan.credits === 'required') {
            const spent = answers.reduce((sum, a, i) => sum + (a.verdict === 'allowed' ? calls[i]!.cost : 0), 0);
            expect((await shared.changeCredits(keyId, {})).after).toBe(before - spent);
          }
        }
        for (const p of plans.keys()) {
          const subject = `x${run}p${p}`;
          expect(await usageRows(new RedisUsageReader(redis.client()), subject), `usage of ${subject}`).toBe(
            await usageRows(usage, subject),
          );
        }
      }),
      { numRuns: 60 },
    );
  }, 240_000);
});
