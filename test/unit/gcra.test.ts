import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Quota } from '../../src/config/plans-schema.js';
import { gcraWindows } from '../../src/quota/gcra.js';
import { decide, EMPTY_STATE, type QuotaOutcome, type QuotaState } from '../../src/quota/quota-state.js';
import { rateLimitHeaders, retryAfterSeconds, windowsOf } from '../../src/quota/rate-limit-headers.js';
import { MINUTE_MS } from '../../src/quota/windows.js';

// algorithm: gcra (src/quota/gcra.ts) on an injected clock: the 60-second promise across any
// span and UTC edge, burst, and headers whose reset is exactly when the next request gets in.

const NO_BAN = { afterRejections: 1_000_000, window: 1, duration: 1 };
/** 10:00:59.900 UTC: 100 ms before a UTC minute edge. */
const BEFORE_EDGE = Date.UTC(2026, 10, 22, 10, 0, 59, 900);

// Small days bind before the minute (their bucket holds perMinute and drains slowly); large
// ones leave the minute to bind: both are drawn.
const gcraQuota = fc
  .record({
    perMinute: fc.integer({ min: 1, max: 12 }),
    burstShare: fc.double({ min: 0, max: 1, noNaN: true }),
    extraPerDay: fc.oneof(fc.integer({ min: 0, max: 30 }), fc.integer({ min: 1_000, max: 100_000 })),
  })
  .map(({ perMinute, burstShare, extraPerDay }): Quota => ({
    perMinute,
    perDay: perMinute + extraPerDay,
    algorithm: 'gcra',
    burst: 1 + Math.floor(burstShare * (perMinute - 1)),
  }));
const arrivals = fc.array(
  fc.record({
    gapMs: fc.oneof(fc.integer({ min: 0, max: 3_000 }), fc.integer({ min: 0, max: 70_000 }), fc.constantFrom(0, 1, 59_999, 60_000, 60_001)),
    cost: fc.integer({ min: 1, max: 3 }),
  }),
  { minLength: 1, maxLength: 200 },
);

function play(quota: Quota, startMs: number, steps: Array<{ gapMs: number; cost: number }>) {
  let state: QuotaState = EMPTY_STATE;
  let nowMs = startMs;
  const admitted: Array<{ atMs: number; cost: number }> = [];
  const refusals: Array<{ before: QuotaState; outcome: QuotaOutcome }> = [];
  for (const { gapMs, cost } of steps) {
    nowMs += gapMs;
    const before = state;
    const { state: next, outcome } = decide(state, nowMs, quota, NO_BAN, cost);
    state = next;
    if (outcome.verdict === 'allowed') admitted.push({ atMs: nowMs, cost });
    else refusals.push({ before, outcome });
  }
  return { admitted, refusals };
}

describe('gcra', () => {
  it('never admits more than perMinute units in any 60-second span, nor perDay in any day-long one', () => {
    fc.assert(
      fc.property(gcraQuota, fc.integer({ min: Date.UTC(2026, 0, 1), max: Date.UTC(2030, 0, 1) }), arrivals, (quota, startMs, steps) => {
        const { admitted } = play(quota, startMs, steps);
        for (const { atMs } of admitted) {
          const inSpan = (spanMs: number) =>
            admitted.filter((a) => a.atMs > atMs - spanMs && a.atMs <= atMs).reduce((n, a) => n + a.cost, 0);
          expect(inSpan(MINUTE_MS)).toBeLessThanOrEqual(quota.perMinute);
          expect(inSpan(86_400_000)).toBeLessThanOrEqual(quota.perDay);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('reports in Retry-After and the headers the exact moment a refused request would get in', () => {
    fc.assert(
      fc.property(gcraQuota, arrivals, (quota, steps) => {
        for (const { before, outcome } of play(quota, BEFORE_EDGE, steps).refusals) {
          if (outcome.cost > Math.min(quota.burst!, quota.perMinute)) continue; // can never get in
          const [binding] = windowsOf(quota, outcome);
          const admitsAt = (ms: number) => decide(before, ms, quota, NO_BAN, outcome.cost).outcome.verdict;
          expect(admitsAt(binding.resetAtMs - 1)).toBe('limited');
          expect(admitsAt(binding.resetAtMs)).toBe('allowed');
          const headers = rateLimitHeaders(quota, outcome);
          expect(retryAfterSeconds(quota, outcome)).toBe(Math.max(1, Math.ceil((binding.resetAtMs - outcome.nowMs) / 1000)));
          expect(headers['x-ratelimit-remaining']).toBe(String(binding.remaining));
        }
      }),
      { numRuns: 300 },
    );
  });

  it('admits burst at once, then one every 60 / (perMinute - burst + 1) s; a UTC minute edge opens nothing', () => {
    const quota: Quota = { perMinute: 6, perDay: 100, algorithm: 'gcra', burst: 3 };
    expect(gcraWindows(quota).minute.intervalUs).toBe(15_000_000);
    const { admitted, refusals } = play(quota, BEFORE_EDGE, [
      { gapMs: 0, cost: 1 },
      { gapMs: 0, cost: 1 },
      { gapMs: 0, cost: 1 },
      { gapMs: 0, cost: 1 },
      { gapMs: 200, cost: 1 }, // past the UTC edge: a fixed window would start afresh here
      { gapMs: 14_800, cost: 1 }, // 15 s after the burst: one more
      { gapMs: 1, cost: 1 },
    ]);
    expect(admitted.map((a) => a.atMs - BEFORE_EDGE)).toEqual([0, 0, 0, 15_000]);
    expect(refusals).toHaveLength(3);
    const headers = rateLimitHeaders(quota, refusals[1]!.outcome);
    // 200 ms after the burst: nothing can be sent, and one more can in 14.8 s.
    expect(headers.ratelimit).toBe('"minute";r=0;t=15');
    expect(headers['ratelimit-policy']).toBe('"minute";q=6;w=60, "day";q=100;w=86400');
    expect(retryAfterSeconds(quota, refusals[1]!.outcome)).toBe(15);
  });

  it('reports what can be sent now and when one more can, while admitting', () => {
    const quota: Quota = { perMinute: 4, perDay: 100, algorithm: 'gcra', burst: 2 };
    let state: QuotaState = EMPTY_STATE;
    const seen: string[] = [];
    for (const atMs of [0, 0, 20_000]) {
      const result = decide(state, BEFORE_EDGE + atMs, quota, NO_BAN, 1);
      state = result.state;
      seen.push(rateLimitHeaders(quota, result.outcome).ratelimit!);
    }
    // interval 60 / 3 = 20 s; burst 2.
    expect(seen).toEqual(['"minute";r=1;t=20', '"minute";r=0;t=20', '"minute";r=0;t=20']);
  });
});
