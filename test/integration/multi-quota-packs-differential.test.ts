import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { MemoryQuotaStore } from '../../src/store/memory/memory-quota-store.js';
import { MemoryUsage } from '../../src/store/memory/memory-usage.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { RedisUsageReader } from '../../src/store/redis/redis-usage-reader.js';
import { quotaKey } from '../../src/store/redis/redis-keys.js';
import { redisForFile } from '../helpers/redis-for-file.js';
import { usageRows } from '../helpers/usage-rows.js';
import { sansMoveNo } from '../helpers/sans-move-no.js';

// Turns of many keys under several plans, packed into MULTI_QUOTA_SCRIPT calls (multi-quota-script.ts:
// up to 32 keys and 128 requests a call, each plan's fixed arguments sent once), against the memory
// store on one injected clock: every answer and, at the end, every key's usage rows equal. A turn's
// requests come in any order over up to 40 keys, a key's under up to three plans at once (per-key
// quotas, a reload within the turn: one section per run, several of one key in one call), costs up
// to 5, with a key whose hash holds another type among them: that key's requests fail alone
// (pcall), the sections after it get their own numbers.

const redis = redisForFile();
const USAGE_RETENTION_MS = 400 * 86_400_000;
const ban: BanPolicy = { afterRejections: 3, window: 60, duration: 90 };
const PLANS: Quota[] = [
  { perMinute: 4, perDay: 9 },
  { perMinute: 3, perDay: 12, algorithm: 'gcra', burst: 2 },
  { perMinute: 5, perDay: 20, perMonth: 25 },
  { perMinute: 4, perDay: 9, shadow: true },
];
const KEYS = 40;

const turn = fc.record({
  requests: fc.array(
    fc.record({ key: fc.integer({ min: 0, max: KEYS - 1 }), plan: fc.integer({ min: 0, max: 2 }), cost: fc.integer({ min: 1, max: 5 }) }),
    { minLength: 2, maxLength: 160 },
  ),
  // Most turns a few keys under one plan each; some with a key asked under several.
  mixed: fc.boolean(),
  advanceMs: fc.oneof(fc.integer({ min: 0, max: 20_000 }), fc.integer({ min: 60_000, max: 4 * 3_600_000 })),
});
const history = fc.record({
  startMs: fc.integer({ min: Date.UTC(2026, 0, 1), max: Date.UTC(2030, 0, 1) }),
  turns: fc.array(turn, { minLength: 1, maxLength: 6 }),
  broken: fc.option(fc.integer({ min: 0, max: KEYS - 1 }), { nil: undefined }),
  // Per key, the plan it keeps unless the turn mixes (index into PLANS, the shadow one included).
  keyPlans: fc.array(fc.integer({ min: 0, max: 3 }), { minLength: KEYS, maxLength: KEYS }),
});

let run = 0;

describe('packed calls of many keys and plans, differentially', () => {
  it('answer every request and count every hour as the memory store does', async () => {
    await fc.assert(
      fc.asyncProperty(history, async ({ startMs, turns, broken, keyPlans }) => {
        const clock = { nowMs: startMs };
        const usage = new MemoryUsage(USAGE_RETENTION_MS);
        const memory = new MemoryQuotaStore(() => clock.nowMs, usage);
        const shared = new RedisQuotaStore(redis.client(), () => clock.nowMs, USAGE_RETENTION_MS);
        const prefix = `packs${++run}`;
        const id = (key: number) => `${prefix}-k${key}`;
        if (broken !== undefined) await redis.client().set(quotaKey(id(broken)), 'x');
        for (const { requests, mixed, advanceMs } of turns) {
          const quotaOf = (r: { key: number; plan: number }) => PLANS[mixed ? r.plan : keyPlans[r.key]!]!;
          const answers = await Promise.all(
            requests.map((r) =>
              shared.consume(id(r.key), quotaOf(r), ban, r.cost).then(
                (o) => JSON.stringify(sansMoveNo(o)),
                (err: Error) => `error ${err.message}`,
              ),
            ),
          );
          for (const [i, r] of requests.entries()) {
            if (r.key === broken) {
              expect(answers[i]).toMatch(/^error WRONGTYPE/);
              continue;
            }
            expect(answers[i], `request ${i} of the turn, key ${r.key}`).toBe(
              JSON.stringify(sansMoveNo(await memory.consume(id(r.key), quotaOf(r), ban, r.cost))),
            );
          }
          clock.nowMs += advanceMs;
        }
        for (let key = 0; key < KEYS; key++) {
          if (key === broken) continue;
          expect(await usageRows(new RedisUsageReader(redis.client()), id(key)), `usage of key ${key}`).toBe(
            await usageRows(usage, id(key)),
          );
        }
      }),
      { numRuns: Number(process.env.DIFF_RUNS ?? 60), ...(process.env.DIFF_SEED && { seed: Number(process.env.DIFF_SEED) }) },
    );
  });
});
