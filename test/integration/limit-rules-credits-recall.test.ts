import { describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import type { RuleCharge } from '../../src/quota/limit-rules.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import type { LeaseGrant, LeaseRequest } from '../../src/store/quota-store.js';
import { redisForFile } from '../helpers/redis-for-file.js';

// A prepaid key with a block of its balance out on a lease, and requests matching limit rules
// decided by RULES_QUOTA_SCRIPT's runs: one the balance in Redis cannot cover is recalled, the
// block's unused credits come back, and it is decided again. Credits are spent once per admitted
// request (the balance falls by exactly their costs), and each rule is charged once per admission.

const redis = redisForFile();

const quota: Quota = { perMinute: 1000, perDay: 10_000, credits: 'required' };
const ban: BanPolicy = { afterRejections: 0, window: 60, duration: 60 };
const rule: RuleCharge = { name: 'per-minute', digest: 'cr', limit: 100, windowMs: 60_000, gcra: false, intervalUs: 0, burst: 0, cost: 1 };

const ask = (want: number, giveBack?: { grant: LeaseGrant; left: number; no: number }): LeaseRequest => ({
  want,
  divisor: 1,
  minBlock: 1,
  giveBack: giveBack?.left ?? 0,
  giveBackRequests: giveBack ? 1 : 0,
  giveBackMinuteStartMs: giveBack?.grant.minuteStartMs ?? 0,
  giveBackDayStartMs: giveBack?.grant.dayStartMs ?? 0,
  giveBackMonthStartMs: giveBack?.grant.monthStartMs ?? 0,
  leaseMs: 1000,
  holder: 'h',
  ends: giveBack !== undefined,
  heldUntilMs: giveBack ? giveBack.grant.nowMs + 1000 : 0,
  giveBackNo: giveBack?.no ?? 0,
  giveBackCredits: giveBack?.left ?? 0,
  giveBackCreditEpoch: giveBack?.grant.creditEpoch ?? 0,
});

describe('limit rules on a prepaid key with a block out', () => {
  it('recall the block for a request the balance in Redis cannot cover, and spend each admitted cost once', async () => {
    const store = new RedisQuotaStore(redis.client());
    await store.changeCredits('p', { set: 20 });
    const grant = await store.reserve('p', quota, ban, ask(15));
    expect(grant.granted).toBe(15);
    expect((await store.changeCredits('p', {})).after).toBe(5);
    // The lease admitted one request of cost 1 from its block: 14 unused.
    let recalls = 0;
    const recall = async () => {
      recalls++;
      await store.reserve('p', quota, ban, ask(0, { grant, left: 14, no: recalls }));
    };
    // One turn: costs 3 and 4 fit the 5 in Redis one after the other only in part; 4 is recalled.
    const answers = await Promise.all([
      store.consumeRules('p', quota, ban, 3, [rule], recall),
      store.consumeRules('p', quota, ban, 4, [rule], recall),
      store.consumeRules('p', quota, ban, 2, [rule], recall),
    ]);
    expect(answers.map((a) => a.verdict)).toEqual(['allowed', 'allowed', 'allowed']);
    expect(recalls).toBe(1);
    // 20 set, 1 spent from the block, 3 + 4 + 2 by the rules' requests.
    expect((await store.changeCredits('p', {})).after).toBe(20 - 1 - 9);
    const counted = await redis.client().hget('tg:limit:per-minute:{cr}', 'c');
    expect(Number(counted)).toBe(3);
  });
});
