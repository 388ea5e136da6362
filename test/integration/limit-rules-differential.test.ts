import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Cluster } from 'ioredis';
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
import { TestRedisCluster } from '../helpers/redis-cluster.js';
import { sansMoveNo } from '../helpers/sans-move-no.js';

// Limit rules decided with the plan (src/quota/limit-rules.ts) by the memory store and by the
// Redis script (RULES_QUOTA_SCRIPT, one call on one server) on a real redis-server, on the same
// random histories and the same injected clock: every answer identical (the plan's outcome, which
// rule refused, every rule's counter); and on a real Redis Cluster, where each rule's counter is in
// another slot and is reserved, then kept or given back (redis-limit-rules.ts). And the all-or-nothing rule, checked on the answers alone:
// a request is charged by every rule it matched and by the plan, or by none of them. After each
// history, every key's usage rows (the export's hours) are the memory store's too.

const redis = redisForFile();

const T0 = Date.UTC(2026, 10, 22, 10, 0, 10);
const ban: BanPolicy = { afterRejections: 4, window: 60, duration: 30 };
const plans: Quota[] = [
  { perMinute: 6, perDay: 40 },
  { perMinute: 20, perDay: 25, algorithm: 'gcra', burst: 4 },
];

const rule = ruleCharge;
const USAGE_RETENTION_MS = 400 * 86_400_000;

const RULES: RuleCharge[] = [
  rule('per-second', 3, 1000, false, 1, 'a'),
  rule('per-minute', 5, 60_000, false, 2, 'b'),
  rule('cell-rate', 6, 60_000, true, 1, 'c'),
  rule('shared', 8, 3_600_000, false, 1, 'd'),
];

interface Step {
  keyId: number;
  plan: number;
  cost: number;
  rules: number[];
  advanceMs: number;
  /**
   * Requests sent together (the Redis store decides one key's requests of one turn in one call); 1
   * on a Cluster. The c-th matches the step's rules from the (c mod their number)-th on.
   */
  burst: number;
}

const step = fc.record({
  keyId: fc.integer({ min: 0, max: 1 }),
  plan: fc.integer({ min: 0, max: 1 }),
  cost: fc.integer({ min: 1, max: 2 }),
  rules: fc.subarray([0, 1, 2, 3], { minLength: 1 }),
  advanceMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 900 }), fc.integer({ min: 10_000, max: 70_000 })),
  burst: fc.integer({ min: 1, max: 5 }),
});

let cluster: TestRedisCluster;
let clusterClient: Cluster;
beforeAll(async () => {
  cluster = await TestRedisCluster.start(3);
  clusterClient = cluster.client();
}, 120_000);
afterAll(async () => {
  clusterClient?.disconnect();
  await cluster?.stop();
});

let run = 0;

describe('limit rules: memory store and Redis script', () => {
  it('give identical answers on random histories, each request charged by all its parts or by none', async () => {
    await differential(() => redis.client(), true);
  }, 240_000);

  it('on a Redis Cluster (reserve, then keep or give back) too', async () => {
    await differential(() => clusterClient, false);
  }, 240_000);

  // A banned key's request that a rule refuses: one server asks the plan's step (RULES_QUOTA_SCRIPT),
  // which answers the ban and counts a refusal in usage, as the embedded store does and as either
  // counts a banned request whose rules fit. A Cluster answers it from a peek of the plan
  // (redis-limit-rules.ts, consumeRulesOnCluster), which counts the refusal when it finds the ban (it
  // cannot ask the plan's step after the rules: a ban ended meanwhile would admit a request its rule
  // refused).
  it('count a banned request a rule refuses as refused, on one server', async () => {
    await bannedAndRuleRefused(() => redis.client());
  });
  it('count a banned request a rule refuses as refused, on a Cluster', async () => {
    await bannedAndRuleRefused(() => clusterClient);
  });
});

async function bannedAndRuleRefused(client: () => ConstructorParameters<typeof RedisQuotaStore>[0]): Promise<void> {
  const clock = { nowMs: T0 + ++run * 86_400_000 * 3 };
  const usage = new MemoryUsage(USAGE_RETENTION_MS);
  const memory = new MemoryQuotaStore(() => clock.nowMs, usage);
  const shared = new RedisQuotaStore(client(), () => clock.nowMs, USAGE_RETENTION_MS);
  const quota: Quota = { perMinute: 1, perDay: 10 };
  const oneRefusal: BanPolicy = { afterRejections: 1, window: 60, duration: 60 };
  const spent = rule('spent', 1, 60_000, false, 1, `${run}-spent`);
  const wide = rule('wide', 100, 60_000, false, 1, `${run}-wide`);
  const keyId = `banned${run}`;
  // Admitted (spends 'spent'), refused by the plan's minute (a ban), then refused by 'spent' while banned.
  const verdicts = [];
  for (const rules of [[spent], [wide], [spent]]) {
    const expected = await memory.consumeRules(keyId, quota, oneRefusal, 1, rules);
    expect(await shared.consumeRules(keyId, quota, oneRefusal, 1, rules)).toEqual(expected);
    verdicts.push(expected.verdict);
  }
  expect(verdicts).toEqual(['allowed', 'banned', 'banned']);
  expect(await usageRows(new RedisUsageReader(client()), keyId)).toBe(await usageRows(usage, keyId));
}

async function differential(client: () => ConstructorParameters<typeof RedisQuotaStore>[0], bursts: boolean): Promise<void> {
  await fc.assert(
    fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 60 }), async (steps: Step[]) => {
      run++;
      const clock = { nowMs: T0 + run * 86_400_000 * 3 };
      const usage = new MemoryUsage(USAGE_RETENTION_MS);
      const memory = new MemoryQuotaStore(() => clock.nowMs, usage);
      const shared = new RedisQuotaStore(client(), () => clock.nowMs, USAGE_RETENTION_MS);
      // A Cluster gives reserved rule units back: a rule's refusal there is not remembered (gateway/rule-refusals.ts).
      expect(shared.rulesOnlyFill).toBe(bursts);
      const counters = new Map<string, { startMs: number; count: number }>();
      for (const s of steps) {
        clock.nowMs += s.advanceMs;
        // Per run, counters of their own: digests carry the run's number.
        const all = s.rules.map((i) => ({ ...RULES[i]!, digest: `${run}-${RULES[i]!.digest}` }));
        const keyId = `r${run}k${s.keyId}`;
        const plan = plans[s.plan]!;
        // Requests of one call matching different rules: the script's runs of requests end at other places.
        const copies = Array.from({ length: bursts ? s.burst : 1 }, (_, c) => all.slice(c % all.length));
        const before = await memory.usage(keyId, plan);
        const expected: RulesOutcome[] = [];
        for (const rules of copies) expected.push(await memory.consumeRules(keyId, plan, ban, s.cost, rules));
        const answers = await Promise.all(copies.map((rules) => shared.consumeRules(keyId, plan, ban, s.cost, rules)));
        expect(answers.map(sansMoveNo)).toEqual(expected.map(sansMoveNo));
        let minuteBefore = before.minuteCount;
        for (const [c, b] of answers.entries()) {
          const rules = copies[c]!;
          allOrNothing(b, minuteBefore, s.cost, rules);
          minuteBefore = b.minuteCount;
          // Each rule's counter, from the answers alone: it grew by the rule's cost if and only if the request was admitted.
          rules.forEach((r, i) => {
            const state = b.rules[i]!;
            const last = counters.get(r.digest);
            const countBefore = last && last.startMs === state.startMs ? last.count : 0;
            expect(state.count).toBe(countBefore + (b.verdict === 'allowed' ? r.cost : 0));
            counters.set(r.digest, state);
          });
        }
      }
      for (const keyId of new Set(steps.map((s) => `r${run}k${s.keyId}`))) {
        expect(await usageRows(new RedisUsageReader(client()), keyId), `usage of ${keyId}`).toBe(await usageRows(usage, keyId));
      }
    }),
    { numRuns: 40 },
  );
}

/** Admitted: the plan's minute grew by the cost. Refused: it did not, and (by the stores' equality) no rule counter moved. */
function allOrNothing(outcome: RulesOutcome, minuteBefore: number, cost: number, rules: RuleCharge[]): void {
  if (outcome.verdict === 'allowed') {
    expect(outcome.minuteCount).toBe(minuteBefore + cost);
    expect(outcome.refusedBy).toBe(-1);
  } else {
    expect(outcome.minuteCount).toBe(minuteBefore);
  }
  if (outcome.refusedBy >= 0) expect(outcome.verdict).toBe('limited');
  expect(outcome.rules).toHaveLength(rules.length);
}
