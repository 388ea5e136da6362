import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { DegradedMode } from '../../src/gateway/degraded-mode.js';
import { rateLimitHeaders, retryAfterSeconds } from '../../src/quota/rate-limit-headers.js';
import { MemoryQuotaStore } from '../../src/store/memory/memory-quota-store.js';

// A decision on the local share is told in the whole quota's terms, the month as much as the minute
// and the day: the quota it is judged under carries the plan's limits, or the month (its limit the
// share, its count the whole) reads as spent and a refusal waits for the month's end.

const ban: BanPolicy = { afterRejections: 100, window: 60, duration: 600 };
const quota: Quota = { perMinute: 4, perDay: 1000, perMonth: 5000 };

describe('local mode under a month quota', () => {
  it('reports the month in whole terms, and a minute refusal waits for the minute', async () => {
    const degraded = new DegradedMode('local', 2, new MemoryQuotaStore(), pino({ level: 'silent' }), 100);
    const first = await degraded.decide('k', quota, ban, 1);
    expect(first.outcome.verdict).toBe('allowed');
    expect(first.quota.perMonth).toBe(5000);
    // The share's minute is 2: the third request is refused by the minute, not the month.
    await degraded.decide('k', quota, ban, 1);
    const refused = await degraded.decide('k', quota, ban, 1);
    expect(refused.outcome.verdict).toBe('limited');
    expect(retryAfterSeconds(refused.quota, refused.outcome)).toBeLessThanOrEqual(60);
    expect(rateLimitHeaders(first.quota, first.outcome).ratelimit).not.toMatch(/^"month"/);
    degraded.close();
  });
});
