import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { RuleRefusals } from '../../src/gateway/rule-refusals.js';
import { ruleAdmit, type RuleCharge, type RuleState } from '../../src/quota/limit-rules.js';
import { rulesHeaders } from '../../src/quota/rule-headers.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { redisForFile } from '../helpers/redis-for-file.js';
import { ruleCharge } from '../helpers/rule-charges.js';

// A limit rule's refusal answered from memory (src/gateway/rule-refusals.ts) against what the
// Redis script (RULES_QUOTA_SCRIPT on a real redis-server) answers the same request at the same
// moment, on random histories under an injected clock: each request is sent to Redis whether or
// not the memory has an answer, and wherever it has one Redis refuses too, by the same rule, with
// the same counters; under a plan that never binds, with the same rate-limit fields and
// Retry-After. Under a plan that does bind, the memory's answer is a refusal still (never an
// admission Redis would give): a plan's refusal or ban are Redis's to count.

const redis = redisForFile();

const T0 = Date.UTC(2026, 10, 22, 10, 0, 10);
const ban: BanPolicy = { afterRejections: 4, window: 60, duration: 30 };
const roomy: Quota = { perMinute: 1_000_000, perDay: 1_000_000 };
const tight: Quota = { perMinute: 6, perDay: 40 };

// Windows of a second to an hour, fixed and gcra, costs of 1 and 2.
const RULES: RuleCharge[] = [
  ruleCharge('second', 2, 1000, false, 1, 'a'),
  ruleCharge('minute', 7, 60_000, false, 2, 'b'),
  ruleCharge('cells', 5, 60_000, true, 1, 'c'),
  ruleCharge('hour', 9, 3_600_000, false, 1, 'd'),
  ruleCharge('cells-10s', 4, 10_000, true, 2, 'e'),
];

// A few lists of rules that requests repeat (as a route's requests do), sharing counters.
const LISTS = [[0], [1], [2], [4], [0, 3], [3, 2], [1, 2, 4], [3, 0, 1]];

const step = fc.record({
  keyId: fc.integer({ min: 0, max: 1 }),
  rules: fc.constantFrom(...LISTS),
  advanceMs: fc.oneof(
    { weight: 3, arbitrary: fc.constant(0) },
    { weight: 3, arbitrary: fc.integer({ min: 1, max: 900 }) },
    { weight: 1, arbitrary: fc.integer({ min: 1_000, max: 70_000 }) },
  ),
});

let run = 0;

describe('limit rules: refusals answered from memory', () => {
  it('are what Redis answers at that moment, fields and Retry-After included, under a plan that never binds', async () => {
    const answered = await differential(roomy, true);
    // The histories reached the memory's answers (the property is not vacuous).
    expect(answered).toBeGreaterThan(100);
  }, 240_000);

  it('are refusals Redis gives too (never an admission), by the same rule, under a plan that binds and bans', async () => {
    expect(await differential(tight, false)).toBeGreaterThan(50);
  }, 240_000);
});

/** Runs random histories; returns how many requests the memory answered. */
async function differential(plan: Quota, sameFields: boolean): Promise<number> {
  let answered = 0;
  let same = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(step, { minLength: 20, maxLength: 80, size: 'max' }), async (steps) => {
      run++;
      const clock = { nowMs: T0 + run * 86_400_000 * 3 };
      const store = new RedisQuotaStore(redis.client(), () => clock.nowMs);
      const refusals = new RuleRefusals(1000, () => clock.nowMs);
      for (const s of steps) {
        clock.nowMs += s.advanceMs;
        // Per run, counters of their own: digests carry the run's number.
        const rules = s.rules.map((i) => ({ ...RULES[i]!, digest: `${run}-${RULES[i]!.digest}` }));
        const subject = `r${run}k${s.keyId}`;
        const local = refusals.answer(subject, rules);
        const sentAtMs = clock.nowMs;
        const outcome = await store.consumeRules(subject, plan, ban, 1, rules);
        refusals.remember(subject, rules, outcome, sentAtMs);
        if (!local) continue;
        answered++;
        expect(outcome.verdict).not.toBe('allowed');
        expect(local.nowMs).toBe(outcome.nowMs);
        if (outcome.verdict === 'banned') continue;
        // The rule the memory names refuses in Redis too, its counter unchanged (nothing but an
        // admission moves it, and it admits none before its time). Redis names an earlier rule of
        // the request when that one has filled since.
        const by = local.refusedBy;
        expect(outcome.refusedBy).toBeGreaterThanOrEqual(0);
        expect(outcome.refusedBy).toBeLessThanOrEqual(by);
        const rule = rules[by]!;
        // A gcra rule's TAT (its window's start and count only label the state), a fixed window's count.
        const held = (state: RuleState) => (rule.gcra ? state.tatUs : [state.startMs, state.count]);
        expect(held(outcome.rules[by]!)).toEqual(held(local.rules[by]!));
        expect(ruleAdmit(outcome.rules[by]!, outcome.nowMs, rules[by]!)).toBeNull();
        const [mine, theirs] = [rulesHeaders(plan, local, rules, local.rules), rulesHeaders(plan, outcome, rules, outcome.rules)];
        // Never a later Retry-After than Redis's: the others may have filled since, not emptied.
        expect(mine.retryAfterSeconds).toBeLessThanOrEqual(theirs.retryAfterSeconds);
        // The other rules' counters as heard when the memory's answer was made: the same answer.
        if (sameFields && outcome.refusedBy === by && JSON.stringify(outcome.rules) === JSON.stringify(local.rules)) {
          expect(mine).toEqual(theirs);
          same++;
        }
      }
    }),
    { numRuns: 40 },
  );
  if (sameFields) expect(same).toBeGreaterThan(50);
  return answered;
}
