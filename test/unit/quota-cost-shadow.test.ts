import { describe, expect, it } from 'vitest';
import { decide, EMPTY_STATE, type QuotaOutcome, type QuotaState } from '../../src/quota/quota-state.js';
import { rateLimitHeaders, retryAfterSeconds } from '../../src/quota/rate-limit-headers.js';
import { DAY_MS, MINUTE_MS } from '../../src/quota/windows.js';
import type { Quota } from '../../src/config/plans-schema.js';

// Route costs and shadow quotas in the rules (quota-state.ts), with an injected clock.

const ban = { afterRejections: 2, window: 60, duration: 900 };
const T0 = Date.UTC(2026, 10, 22, 10, 0, 20);
const minuteEnd = T0 - (T0 % MINUTE_MS) + MINUTE_MS;
const dayEnd = T0 - (T0 % DAY_MS) + DAY_MS;

function run(quota: Quota, costs: number[]): QuotaOutcome[] {
  let state: QuotaState = EMPTY_STATE;
  return costs.map((cost, i) => {
    const result = decide(state, T0 + i, quota, ban, cost);
    state = result.state;
    return result.outcome;
  });
}

describe('route costs', () => {
  it('consume their units in both windows, and a refusal consumes none of them', () => {
    const outcomes = run({ perMinute: 10, perDay: 100 }, [4, 4, 4, 2]);
    expect(outcomes.map((o) => [o.verdict, o.minuteCount, o.dayCount])).toEqual([
      ['allowed', 4, 4],
      ['allowed', 8, 8],
      ['limited', 8, 8],
      ['allowed', 10, 10],
    ]);
  });

  it('report units: remaining is what is left, and the minute binds with Retry-After at its end', () => {
    const [, , refused] = run({ perMinute: 10, perDay: 100 }, [4, 4, 4]);
    const headers = rateLimitHeaders({ perMinute: 10, perDay: 100 }, refused!);
    expect(headers['x-ratelimit-remaining']).toBe('2');
    expect(headers.ratelimit).toBe(`"minute";r=2;t=${Math.ceil((minuteEnd - refused!.nowMs) / 1000)}`);
    expect(retryAfterSeconds({ perMinute: 10, perDay: 100 }, refused!)).toBe(Math.ceil((minuteEnd - refused!.nowMs) / 1000));
  });

  it('point at the later reset when neither window has room for the cost, even if the minute has fewer left', () => {
    // 7 of 10 used this minute (3 left), 7 of 11 today (4 left): a 5-unit request fits neither,
    // and a new minute would not help: only midnight does.
    const quota = { perMinute: 10, perDay: 11 };
    const [, refused] = run(quota, [7, 5]);
    expect(refused).toMatchObject({ verdict: 'limited', minuteCount: 7, dayCount: 7 });
    const headers = rateLimitHeaders(quota, refused!);
    expect(headers.ratelimit).toMatch(/^"day";r=4;t=\d+$/);
    expect(retryAfterSeconds(quota, refused!)).toBe(Math.ceil((dayEnd - refused!.nowMs) / 1000));
  });
});

describe('shadow quotas', () => {
  it('decide and count as usual but count no refusal towards a ban', () => {
    const outcomes = run({ perMinute: 2, perDay: 2, shadow: true }, [1, 1, 1, 1, 1, 1]);
    expect(outcomes.map((o) => o.verdict)).toEqual(['allowed', 'allowed', 'limited', 'limited', 'limited', 'limited']);
    expect(outcomes.every((o) => o.rejections === 0)).toBe(true);
    expect(outcomes.at(-1)).toMatchObject({ minuteCount: 2, dayCount: 2, bannedUntilMs: 0 });
  });

  it('the same quota without shadow bans at the configured count', () => {
    const outcomes = run({ perMinute: 2, perDay: 2 }, [1, 1, 1, 1]);
    expect(outcomes.map((o) => o.verdict)).toEqual(['allowed', 'allowed', 'limited', 'banned']);
  });
});
