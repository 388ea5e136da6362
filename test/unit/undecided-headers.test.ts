import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { Quota } from '../../src/config/plans-schema.js';
import { DegradedMode } from '../../src/gateway/degraded-mode.js';
import type { QuotaOutcome } from '../../src/quota/quota-state.js';
import { undecidedHeaders } from '../../src/quota/rate-limit-headers.js';
import { MemoryQuotaStore } from '../../src/store/memory/memory-quota-store.js';

// An answer given without a quota decision (503 gateway_overloaded) carries the rate-limit fields
// of what this replica last heard, never overstating what is left: a window spent as heard is told
// as is; otherwise the minute with nothing remaining.

const NOW = Date.UTC(2030, 0, 10, 12, 0, 20);
const heard = (more: Partial<QuotaOutcome>): QuotaOutcome => ({
  verdict: 'allowed',
  minuteCount: 0,
  dayCount: 0,
  monthCount: 0,
  rejections: 0,
  nowMs: NOW,
  bannedUntilMs: 0,
  cost: 1,
  minuteTatUs: 0,
  ...more,
});

describe('rate-limit fields of an undecided answer', () => {
  it('tells the minute with nothing remaining when every window had room as last heard', () => {
    const quota: Quota = { perMinute: 100, perDay: 1000 };
    const headers = undecidedHeaders(quota, heard({ minuteCount: 5, dayCount: 5 }));
    expect(headers).toMatchObject({
      'x-ratelimit-limit': '100',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': String(Date.UTC(2030, 0, 10, 12, 1) / 1000),
      ratelimit: '"minute";r=0;t=40',
      'ratelimit-policy': '"minute";q=100;w=60, "day";q=1000;w=86400',
    });
  });

  it('tells a window spent as heard as it is, with its own reset', () => {
    const quota: Quota = { perMinute: 100, perDay: 50 };
    const headers = undecidedHeaders(quota, heard({ minuteCount: 50, dayCount: 50 }));
    expect(headers).toMatchObject({
      'x-ratelimit-limit': '50',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': String(Date.UTC(2030, 0, 11) / 1000),
    });
  });

  it('gcra: the minute told spent, its reset the next cell', () => {
    const quota: Quota = { perMinute: 60, perDay: 1000, algorithm: 'gcra', burst: 10 };
    const headers = undecidedHeaders(quota, heard({}));
    expect(headers['x-ratelimit-remaining']).toBe('0');
    expect(Number(headers['x-ratelimit-reset'])).toBeGreaterThan(NOW / 1000);
    expect(Number(headers['x-ratelimit-reset'])).toBeLessThanOrEqual(NOW / 1000 + 60);
  });

  it('never tells a credit balance it does not know', () => {
    const quota: Quota = { perMinute: 100, perDay: 1000, credits: 'required' };
    expect(undecidedHeaders(quota, heard({ creditBalance: 7 }))).not.toHaveProperty('tollgate-credits-remaining');
  });

  it('takes the counts this replica last heard, in the windows still current', () => {
    const degraded = new DegradedMode('local', 3, new MemoryQuotaStore(), pino({ level: 'silent' }), 100, () => NOW);
    const quota: Quota = { perMinute: 100, perDay: 40 };
    degraded.heard('k', heard({ nowMs: NOW - 30_000, minuteCount: 40, dayCount: 40 }));
    expect(undecidedHeaders(quota, degraded.lastHeard('k', quota, 1))['x-ratelimit-reset']).toBe(String(Date.UTC(2030, 0, 11) / 1000));
    // Nothing heard of another subject: nothing known spent, the minute told with none left.
    expect(undecidedHeaders(quota, degraded.lastHeard('other', quota, 1))).toMatchObject({
      'x-ratelimit-limit': '100',
      'x-ratelimit-remaining': '0',
    });
    degraded.close();
  });
});
