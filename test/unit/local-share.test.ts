import { describe, expect, it } from 'vitest';
import type { Quota } from '../../src/config/plans-schema.js';
import { inWholeTerms, LocalShare } from '../../src/gateway/local-share.js';
import type { QuotaOutcome } from '../../src/quota/quota-state.js';

// The local budget while Redis is unreachable: a replica's share of what was left when it last
// heard from Redis, never of the whole limit (a key at its limit admits nothing more locally).

const T0 = Date.UTC(2026, 0, 5, 10, 30, 10);
const quota: Quota = { perMinute: 200, perDay: 1000 };

function heard(minuteCount: number, dayCount: number, nowMs = T0): QuotaOutcome {
  return { verdict: 'allowed', minuteCount, dayCount, rejections: 0, nowMs, bannedUntilMs: 0, cost: 1, minuteTatUs: 0 };
}

describe('local share of what was left', () => {
  it('gives each replica its share of the units left in each window heard of', () => {
    const share = new LocalShare(100, 3);
    share.remember('k', heard(140, 700));
    expect(share.shareOf('k', quota, T0 + 5000)).toMatchObject({ perMinute: 20, perDay: 100 });
  });

  it('gives nothing when the key was at its limit (the issue: 200 admitted past a 200/minute limit)', () => {
    const share = new LocalShare(100, 1);
    share.remember('k', heard(200, 400));
    expect(share.shareOf('k', quota, T0 + 1000)).toMatchObject({ perMinute: 0, perDay: 600 });
  });

  it('gives the share of the whole limit only for windows never heard of', () => {
    const share = new LocalShare(100, 4);
    expect(share.shareOf('unknown', quota, T0)).toMatchObject({ perMinute: 50, perDay: 250 });
    share.remember('k', heard(200, 400));
    // The next minute began since: its share is of the whole minute; the day is still the one heard of.
    expect(share.shareOf('k', quota, T0 + 60_000)).toMatchObject({ perMinute: 50, perDay: 150 });
  });

  it('counts a gcra minute as a fixed window while alone', () => {
    const share = new LocalShare(100, 2).shareOf('k', { perMinute: 60, perDay: 100, algorithm: 'gcra', burst: 10 }, T0);
    expect(share).toMatchObject({ algorithm: 'fixed', perMinute: 30, perDay: 50 });
    expect(share.burst).toBeUndefined();
  });

  it('tells a local decision in the whole quota: remaining is what this replica may still admit', () => {
    const share = { ...quota, perMinute: 20, perDay: 100 };
    const told = inWholeTerms(quota, share, heard(5, 5));
    expect(quota.perMinute - told.minuteCount).toBe(15);
    expect(quota.perDay - told.dayCount).toBe(95);
  });
});
