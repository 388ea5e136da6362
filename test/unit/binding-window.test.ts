import { describe, expect, it } from 'vitest';
import type { QuotaOutcome } from '../../src/quota/quota-state.js';
import { rateLimitHeaders, retryAfterSeconds } from '../../src/quota/rate-limit-headers.js';
import { DAY_MS, MINUTE_MS } from '../../src/quota/windows.js';

// The worked examples of the binding window in docs/clients.md ("Rate-limit headers"), one per case, with
// an injected time: 2026-11-22T10:00:20Z, 40 s before the minute ends.

const NOW_MS = Date.UTC(2026, 10, 22, 10, 0, 20);
const MINUTE_END_S = (NOW_MS - (NOW_MS % MINUTE_MS) + MINUTE_MS) / 1000;
const DAY_END_S = (NOW_MS - (NOW_MS % DAY_MS) + DAY_MS) / 1000;
const NOW_S = NOW_MS / 1000;
const quota = { perMinute: 60, perDay: 1000 };

const outcome = (verdict: QuotaOutcome['verdict'], minuteCount: number, dayCount: number, bannedUntilMs = 0): QuotaOutcome => ({
  verdict,
  minuteCount,
  dayCount,
  rejections: 0,
  nowMs: NOW_MS,
  bannedUntilMs,
  cost: 1,
  minuteTatUs: 0,
});

/** X-RateLimit-Reset, RateLimit's t and (on a refusal) Retry-After must name one moment. */
function expectOneReset(headers: Record<string, string>, resetS: number, retryAfter?: number) {
  expect(headers['x-ratelimit-reset']).toBe(String(resetS));
  expect(headers.ratelimit).toMatch(new RegExp(`;t=${resetS - NOW_S}$`));
  if (retryAfter !== undefined) expect(retryAfter).toBe(resetS - NOW_S);
}

describe('the binding window', () => {
  it('is the minute when it has fewer left (48 of 60 used this minute, 100 of 1000 today)', () => {
    const headers = rateLimitHeaders(quota, outcome('allowed', 48, 100));
    expect(headers['x-ratelimit-limit']).toBe('60');
    expect(headers['x-ratelimit-remaining']).toBe('12');
    expect(headers.ratelimit).toBe('"minute";r=12;t=40');
    expectOneReset(headers, MINUTE_END_S);
  });

  it('is the day when it has fewer left (10 this minute, 995 today)', () => {
    const headers = rateLimitHeaders(quota, outcome('allowed', 10, 995));
    expect(headers['x-ratelimit-limit']).toBe('1000');
    expect(headers['x-ratelimit-remaining']).toBe('5');
    expectOneReset(headers, DAY_END_S);
  });

  it('is the minute when only the minute is used up, and Retry-After waits for the next minute', () => {
    const refused = outcome('limited', 60, 500);
    const headers = rateLimitHeaders(quota, refused);
    expect(headers.ratelimit).toBe('"minute";r=0;t=40');
    expectOneReset(headers, MINUTE_END_S, retryAfterSeconds(quota, refused));
  });

  it('is the day, which resets later, when both are used up: a new minute would not help', () => {
    const bothUsedUp = { perMinute: 10, perDay: 1000 };
    const refused = outcome('limited', 10, 1000);
    const headers = rateLimitHeaders(bothUsedUp, refused);
    expect(headers['x-ratelimit-limit']).toBe('1000');
    expect(headers['x-ratelimit-remaining']).toBe('0');
    expect(headers.ratelimit).toMatch(/^"day";r=0;/);
    expectOneReset(headers, DAY_END_S, retryAfterSeconds(bothUsedUp, refused));
  });

  it('is the day on a tie with requests left too (perMinute = perDay = 10, 4 used)', () => {
    const headers = rateLimitHeaders({ perMinute: 10, perDay: 10 }, outcome('allowed', 4, 4));
    expect(headers.ratelimit).toMatch(/^"day";r=6;/);
    expectOneReset(headers, DAY_END_S);
  });

  it('is the UTC day under gcra too when it has fewer left (60/min, burst 60, minute free; 995 of 1000 today)', () => {
    const smooth = { perMinute: 60, perDay: 1000, algorithm: 'gcra' as const, burst: 60 };
    const headers = rateLimitHeaders(smooth, outcome('allowed', 10, 995));
    expect(headers['x-ratelimit-limit']).toBe('1000');
    expect(headers['x-ratelimit-remaining']).toBe('5');
    expect(headers.ratelimit).toMatch(/^"day";r=5;/);
    expectOneReset(headers, DAY_END_S);
  });

  it('is the UTC day under gcra once the day is spent, even with the minute free: Retry-After waits for 00:00 UTC', () => {
    const smooth = { perMinute: 60, perDay: 1000, algorithm: 'gcra' as const };
    const refused = outcome('limited', 10, 1000);
    const headers = rateLimitHeaders(smooth, refused);
    expect(headers.ratelimit).toMatch(/^"day";r=0;/);
    expectOneReset(headers, DAY_END_S, retryAfterSeconds(smooth, refused));
  });

  it('ends with the ban while banned, whatever the windows say', () => {
    const bannedUntilMs = NOW_MS + 900_000;
    const banned = outcome('banned', 3, 3, bannedUntilMs);
    const headers = rateLimitHeaders(quota, banned);
    expect(headers['x-ratelimit-remaining']).toBe('0');
    expect(headers.ratelimit).toBe('"minute";r=0;t=900');
    expectOneReset(headers, bannedUntilMs / 1000, retryAfterSeconds(quota, banned));
  });

  it('is the month when it has the fewest left, resetting at the month end of the zone (Berlin: 2026-11-30T23:00Z)', () => {
    const monthly = { perMinute: 60, perDay: 1000, perMonth: 20_000, calendar: { timeZone: 'Europe/Berlin' } };
    const headers = rateLimitHeaders(monthly, { ...outcome('allowed', 10, 100), monthCount: 19_990 });
    expect(headers['x-ratelimit-limit']).toBe('20000');
    expect(headers['x-ratelimit-remaining']).toBe('10');
    expect(headers['ratelimit-policy']).toBe('"minute";q=60;w=60, "day";q=1000;w=86400, "month";q=20000;w=2592000');
    expectOneReset(headers, Date.UTC(2026, 10, 30, 23) / 1000);
  });

  it('is the month once it is spent, with the day and minute free: Retry-After waits for the month', () => {
    const monthly = { perMinute: 60, perDay: 1000, perMonth: 20_000 };
    const refused = { ...outcome('limited', 10, 100), monthCount: 20_000 };
    const headers = rateLimitHeaders(monthly, refused);
    expect(headers.ratelimit).toMatch(/^"month";r=0;/);
    expectOneReset(headers, Date.UTC(2026, 11, 1) / 1000, retryAfterSeconds(monthly, refused));
  });

  it('is the day, in its zone, when the day is spent and the month is not', () => {
    const monthly = { perMinute: 60, perDay: 1000, perMonth: 20_000, calendar: { timeZone: 'Europe/Berlin' } };
    const refused = { ...outcome('limited', 10, 1000), monthCount: 5000 };
    const headers = rateLimitHeaders(monthly, refused);
    expect(headers.ratelimit).toMatch(/^"day";r=0;/);
    // 2026-11-22 10:00:20Z is 11:00:20 in Berlin: the day ends at 23:00Z.
    expectOneReset(headers, Date.UTC(2026, 10, 22, 23) / 1000, retryAfterSeconds(monthly, refused));
  });
});
