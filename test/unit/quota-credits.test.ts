import { describe, expect, it } from 'vitest';
import type { Quota } from '../../src/config/plans-schema.js';
import { planSchema } from '../../src/config/plans-schema.js';
import { decide, EMPTY_STATE, type QuotaOutcome, type QuotaState } from '../../src/quota/quota-state.js';
import { rateLimitHeaders } from '../../src/quota/rate-limit-headers.js';

// Prepaid credits in the rules (quota-state.ts): spent with the windows in one decision.

const ban = { afterRejections: 2, window: 60, duration: 900 };
const T0 = Date.UTC(2026, 10, 22, 10, 0, 20);
const credits: Quota = { perMinute: 10, perDay: 100, credits: 'required' };

function run(quota: Quota, balance: number, costs: number[]): { outcomes: QuotaOutcome[]; state: QuotaState } {
  let state: QuotaState = { ...EMPTY_STATE, creditBalance: balance };
  const outcomes = costs.map((cost, i) => {
    const result = decide(state, T0 + i, quota, ban, cost);
    state = result.state;
    return result.outcome;
  });
  return { outcomes, state };
}

describe('credits: required', () => {
  it('spends each admitted request’s cost from the balance, with its windows', () => {
    const { outcomes } = run(credits, 5, [2, 3]);
    expect(outcomes.map((o) => [o.verdict, o.minuteCount, o.creditBalance])).toEqual([
      ['allowed', 2, 3],
      ['allowed', 5, 0],
    ]);
  });

  it('refuses a request the balance cannot cover: nothing spent, no window consumed, no ban counted', () => {
    const { outcomes, state } = run(credits, 3, [2, 2, 2, 2, 1]);
    expect(outcomes.map((o) => [o.verdict, o.minuteCount, o.rejections, o.creditBalance])).toEqual([
      ['allowed', 2, 0, 1],
      ['unfunded', 2, 0, 1],
      ['unfunded', 2, 0, 1],
      ['unfunded', 2, 0, 1],
      ['allowed', 3, 0, 0],
    ]);
    expect(state.bannedUntilMs).toBe(0);
  });

  it('is refused for credits even under a shadow quota (a balance is never spent past zero)', () => {
    const { outcomes } = run({ ...credits, shadow: true }, 0, [1]);
    expect(outcomes[0]!.verdict).toBe('unfunded');
  });

  it('leaves a quota without credits alone: the balance is neither needed nor spent', () => {
    const { outcomes } = run({ perMinute: 10, perDay: 100 }, 0, [1, 1]);
    expect(outcomes.map((o) => [o.verdict, o.creditBalance])).toEqual([
      ['allowed', 0],
      ['allowed', 0],
    ]);
  });

  it('a window refusal stays a 429 refusal and spends nothing', () => {
    const { outcomes } = run({ ...credits, perMinute: 2, perDay: 2 }, 10, [2, 1]);
    expect(outcomes.map((o) => [o.verdict, o.creditBalance, o.rejections])).toEqual([
      ['allowed', 8, 0],
      ['limited', 8, 1],
    ]);
  });

  it('tells the balance in Tollgate-Credits-Remaining, only under a credits quota', () => {
    const { outcomes } = run(credits, 4, [1]);
    expect(rateLimitHeaders(credits, outcomes[0]!)['tollgate-credits-remaining']).toBe('3');
    expect(rateLimitHeaders({ perMinute: 10, perDay: 100 }, outcomes[0]!)).not.toHaveProperty('tollgate-credits-remaining');
  });

  it('is validated in plans.yaml', () => {
    expect(planSchema.safeParse({ perMinute: 1, perDay: 1, credits: 'required' }).success).toBe(true);
    const wrong = planSchema.safeParse({ perMinute: 1, perDay: 1, credits: true });
    expect(wrong.success).toBe(false);
    expect(wrong.error!.issues[0]!.message).toMatch(/credits must be "required"/);
  });
});
