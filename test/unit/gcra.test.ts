import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Quota } from '../../src/config/plans-schema.js';
import { gcraMinute } from '../../src/quota/gcra.js';
import { decide, EMPTY_STATE, type QuotaOutcome, type QuotaState } from '../../src/quota/quota-state.js';
import { rateLimitHeaders, retryAfterSeconds, windowsOf } from '../../src/quota/rate-limit-headers.js';
import { DAY_MS, MINUTE_MS, windowStartMs } from '../../src/quota/windows.js';

// algorithm: gcra (src/quota/gcra.ts) on an injected clock: the 60-second promise across any
// span and UTC edge, burst, the day as a UTC-day budget, and headers whose reset is exactly when
// the next request gets in.

const NO_BAN = { afterRejections: 1_000_000, window: 1, duration: 1 };
/** 10:00:59.900 UTC: 100 ms before a UTC minute edge. */
const BEFORE_EDGE = Date.UTC(2026, 10, 22, 10, 0, 59, 900);

// Small days are spent within a history and then bind until 00:00 UTC; large ones leave the
// minute to bind: both are drawn.
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
/** Anywhere in 2026-2030, or in the two hours before a UTC midnight, so that histories cross it. */
const startMs = fc.oneof(
  fc.integer({ min: Date.UTC(2026, 0, 1), max: Date.UTC(2030, 0, 1) }),
  fc
    .tuple(fc.integer({ min: 0, max: 1460 }), fc.integer({ min: 1, max: 2 * 3_600_000 }))
    .map(([day, beforeMs]) => Date.UTC(2026, 0, 2 + day) - beforeMs),
);
const arrivals = fc.array(
  fc.record({
    gapMs: fc.oneof(fc.integer({ min: 0, max: 3_000 }), fc.integer({ min: 0, max: 70_000 }), fc.constantFrom(0, 1, 59_999, 60_000, 60_001)),
    cost: fc.integer({ min: 1, max: 3 }),
  }),
  { minLength: 1, maxLength: 200 },
);

/** Units admitted in the UTC day of `atMs`, up to and including it. */
function usedToday(admitted: Array<{ atMs: number; cost: number }>, atMs: number): number {
  const dayStartMs = windowStartMs(atMs, DAY_MS);
  return admitted.filter((a) => a.atMs >= dayStartMs && a.atMs <= atMs).reduce((n, a) => n + a.cost, 0);
}

function play(quota: Quota, startMs: number, steps: Array<{ gapMs: number; cost: number }>) {
  let state: QuotaState = EMPTY_STATE;
  let nowMs = startMs;
  const admitted: Array<{ atMs: number; cost: number }> = [];
  /** Each refusal, with the state before it and the units admitted in its UTC day until then. */
  const refusals: Array<{ before: QuotaState; outcome: QuotaOutcome; usedToday: number }> = [];
  for (const { gapMs, cost } of steps) {
    nowMs += gapMs;
    const before = state;
    const { state: next, outcome } = decide(state, nowMs, quota, NO_BAN, cost);
    state = next;
    if (outcome.verdict === 'allowed') admitted.push({ atMs: nowMs, cost });
    else refusals.push({ before, outcome, usedToday: usedToday(admitted, nowMs) });
  }
  return { admitted, refusals };
}

describe('gcra', () => {
  it('never admits more than perMinute units in any 60-second span, nor perDay in any UTC day', () => {
    fc.assert(
      fc.property(gcraQuota, startMs, arrivals, (quota, start, steps) => {
        const { admitted } = play(quota, start, steps);
        for (const { atMs } of admitted) {
          const inSpan = admitted.filter((a) => a.atMs > atMs - MINUTE_MS && a.atMs <= atMs).reduce((n, a) => n + a.cost, 0);
          expect(inSpan).toBeLessThanOrEqual(quota.perMinute);
          expect(usedToday(admitted, atMs)).toBeLessThanOrEqual(quota.perDay);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('refuses for the day only when the UTC day has no room left: any other refusal is the minute', () => {
    fc.assert(
      fc.property(gcraQuota, startMs, arrivals, (quota, start, steps) => {
        for (const { outcome, usedToday: used } of play(quota, start, steps).refusals) {
          const [binding] = windowsOf(quota, outcome);
          expect(outcome.dayCount).toBe(used);
          if (used + outcome.cost <= quota.perDay) expect(binding.name).toBe('minute');
          else expect(binding.resetAtMs).toBeGreaterThanOrEqual(windowStartMs(outcome.nowMs, DAY_MS) + DAY_MS);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('reports in Retry-After and the headers the exact moment a refused request would get in', () => {
    fc.assert(
      fc.property(gcraQuota, fc.oneof(fc.constant(BEFORE_EDGE), startMs), arrivals, (quota, start, steps) => {
        for (const { before, outcome } of play(quota, start, steps).refusals) {
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
    expect(gcraMinute(quota).intervalUs).toBe(15_000_000);
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

  it('a 60/min, 1000/day plan admits 60 a minute after its first minute, not one every 92 s (issue 21)', () => {
    // Before the fix the day was a cell rate too (burst 60, one unit every 86,400 s / 941): after
    // the first minute this client got one request through every 92 s.
    const quota: Quota = { perMinute: 60, perDay: 1000, algorithm: 'gcra' };
    const start = Date.UTC(2026, 10, 22, 8, 0, 0);
    const midnight = Date.UTC(2026, 10, 23);
    let state: QuotaState = EMPTY_STATE;
    const admittedPerMinute: number[] = [];
    let last: QuotaOutcome | undefined;
    // A greedy client: a request every 250 ms for 20 minutes.
    for (let atMs = start; atMs < start + 20 * MINUTE_MS; atMs += 250) {
      const result = decide(state, atMs, quota, NO_BAN);
      state = result.state;
      last = result.outcome;
      const minute = Math.floor((atMs - start) / MINUTE_MS);
      admittedPerMinute[minute] = (admittedPerMinute[minute] ?? 0) + (last.verdict === 'allowed' ? 1 : 0);
    }
    // 16 whole minutes of 60, the day's last 40, then nothing until 00:00 UTC.
    expect(admittedPerMinute).toEqual([...Array<number>(16).fill(60), 40, 0, 0, 0]);
    expect(last).toMatchObject({ verdict: 'limited', dayCount: 1000 });
    // The refusal names the UTC day's end, as a fixed plan's would.
    const headers = rateLimitHeaders(quota, last!);
    expect(headers['x-ratelimit-limit']).toBe('1000');
    expect(headers['x-ratelimit-remaining']).toBe('0');
    expect(headers['x-ratelimit-reset']).toBe(String(midnight / 1000));
    expect(headers.ratelimit).toBe(`"day";r=0;t=${Math.ceil((midnight - last!.nowMs) / 1000)}`);
    expect(retryAfterSeconds(quota, last!)).toBe(Math.ceil((midnight - last!.nowMs) / 1000));
    expect(decide(state, midnight - 1, quota, NO_BAN).outcome.verdict).toBe('limited');
    const afterMidnight = decide(state, midnight, quota, NO_BAN).outcome;
    expect(afterMidnight).toMatchObject({ verdict: 'allowed', dayCount: 1 });
    expect(rateLimitHeaders(quota, afterMidnight).ratelimit).toBe('"minute";r=0;t=1');
  });
});
