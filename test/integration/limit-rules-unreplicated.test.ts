import { describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import type { QuotaOutcome } from '../../src/quota/quota-state.js';
import type { RuleCharge } from '../../src/quota/limit-rules.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import type { ReplicaWaitListener } from '../../src/store/redis/replica-wait.js';
import { TurnMarks } from '../../src/store/redis/turn-marks.js';
import type { RedisClient } from '../../src/store/redis/connect.js';
import { redisForFile } from '../helpers/redis-for-file.js';

// quota.waitForReplica on a redis-server with no replica: every WAIT times out, so every admitted
// decision must reach the listener as unreplicated (its units are what a failover would lose),
// those of requests matching limit rules (decided in the turn's pipeline, behind the same WAIT) too.

const redis = redisForFile();

const quota: Quota = { perMinute: 100, perDay: 1000 };
const ban: BanPolicy = { afterRejections: 0, window: 60, duration: 60 };
const rule: RuleCharge = { name: 'per-minute', digest: 'd', limit: 50, windowMs: 60_000, gcra: false, intervalUs: 0, burst: 0, cost: 1 };

function recording(client: RedisClient): ReplicaWaitListener & { units: number; acknowledged: number } {
  return {
    marks: new TurnMarks(client),
    units: 0,
    acknowledged: 0,
    unreplicated(_subject: string, admitted: Pick<QuotaOutcome, 'verdict' | 'cost'>) {
      if (admitted.verdict === 'allowed') this.units += admitted.cost;
    },
    unreplicatedGiveBack() {},
    settled: () => Promise.resolve(),
    replicated() {
      this.acknowledged++;
    },
  };
}

describe('quota.waitForReplica and limit rules', () => {
  it('keeps the units of plan-only and rule-matching requests whose WAIT timed out', async () => {
    const client = redis.client();
    const store = new RedisQuotaStore(client);
    const listener = recording(client);
    expect(store.waitForReplicas({ replicas: 1, timeoutMs: 5 }, listener)).toBe(true);

    const plain = await store.consume('plain', quota, ban, 2);
    expect(plain.verdict).toBe('allowed');
    expect(listener.units).toBe(2);

    const ruled = await Promise.all([
      store.consumeRules('ruled', quota, ban, 3, [rule]),
      store.consumeRules('ruled', quota, ban, 1, [rule]),
    ]);
    expect(ruled.map((o) => o.verdict)).toEqual(['allowed', 'allowed']);
    expect(listener.units).toBe(2 + 3 + 1);
    expect(listener.acknowledged).toBe(0);
  });
});
