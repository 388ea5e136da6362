import { describe, expect, it } from 'vitest';
import { decide, EMPTY_STATE, expiresAtMs, type QuotaState } from '../../src/quota/quota-state.js';
import { rateLimitHeaders, retryAfterSeconds } from '../../src/quota/rate-limit-headers.js';
import { DAY_MS, MINUTE_MS } from '../../src/quota/windows.js';
import { MemoryQuotaStore } from '../../src/store/memory/memory-quota-store.js';

// Window maths and the quota decision with an injected clock: no waiting for real minutes.

const quota = { perMinute: 3, perDay: 5 };
const ban = { afterRejections: 3, window: 60, duration: 900 };
/** 2026-11-22T10:00:00.000Z, a minute and a day boundary-aligned instant plus 10 s. */
const T0 = Date.UTC(2026, 10, 22, 10, 0, 10);

function run(times: number[], q = quota, b = ban) {
  let state: QuotaState = EMPTY_STATE;
  return times.map((now) => {
    const result = decide(state, now, q, b);
    state = result.state;
    return result.outcome;
  });
}

describe('quota decision', () => {
  it('admits perMinute requests in a minute, then refuses until the next UTC minute', () => {
    const outcomes = run([T0, T0 + 1, T0 + 2, T0 + 3, T0 + 50_000 - 10_000 + 59_000 - 50_000]);
    expect(outcomes.map((o) => o.verdict)).toEqual(['allowed', 'allowed', 'allowed', 'limited', 'limited']);
    const nextMinute = T0 - (T0 % MINUTE_MS) + MINUTE_MS;
    const after = run([T0, T0 + 1, T0 + 2, nextMinute]);
    expect(after.at(-1)).toMatchObject({ verdict: 'allowed', minuteCount: 1, dayCount: 4 });
  });

  it('consumes nothing in either window when it refuses', () => {
    const outcomes = run([T0, T0 + 1, T0 + 2, T0 + 3, T0 + 4]);
    expect(outcomes.at(-1)).toMatchObject({ verdict: 'limited', minuteCount: 3, dayCount: 3 });
  });

  it('lets the day window bind once the day is used up, until 00:00 UTC', () => {
    const m = MINUTE_MS;
    const outcomes = run([T0, T0 + 1, T0 + 2, T0 + m, T0 + m + 1, T0 + 2 * m]);
    expect(outcomes.map((o) => o.verdict)).toEqual(['allowed', 'allowed', 'allowed', 'allowed', 'allowed', 'limited']);
    const last = outcomes.at(-1)!;
    expect(last).toMatchObject({ minuteCount: 0, dayCount: 5 });
    const nextDay = T0 - (T0 % DAY_MS) + DAY_MS;
    expect(retryAfterSeconds(quota, last)).toBe(Math.ceil((nextDay - last.nowMs) / 1000));
    expect(run([T0, T0 + 1, T0 + 2, T0 + m, T0 + m + 1, nextDay]).at(-1)!.verdict).toBe('allowed');
  });

  it('bans a key after afterRejections refusals within the window, for duration seconds', () => {
    const outcomes = run([T0, T0 + 1, T0 + 2, T0 + 3, T0 + 4, T0 + 5, T0 + 6]);
    expect(outcomes.map((o) => o.verdict)).toEqual(['allowed', 'allowed', 'allowed', 'limited', 'limited', 'banned', 'banned']);
    expect(outcomes[5]!.bannedUntilMs).toBe(T0 + 5 + 900_000);
    expect(retryAfterSeconds(quota, outcomes[6]!)).toBe(900);
  });

  it('does not ban when the rejections are spread wider than the window', () => {
    let state: QuotaState = { ...EMPTY_STATE, minuteStartMs: 0 };
    const verdicts: string[] = [];
    // Over the limit every minute; one rejection per minute, never three within 60 s.
    for (let minute = 0; minute < 5; minute++) {
      const start = T0 + minute * MINUTE_MS;
      for (let i = 0; i < 4; i++) {
        const r = decide(state, start + i, quota, { ...ban, window: 30 });
        state = r.state;
        verdicts.push(r.outcome.verdict);
      }
      if (state.dayCount >= quota.perDay) break;
    }
    expect(verdicts).not.toContain('banned');
  });

  it('ends a ban by itself after its duration', () => {
    const store = { now: T0 };
    const memory = new MemoryQuotaStore(() => store.now);
    return (async () => {
      const verdicts: string[] = [];
      for (let i = 0; i < 7; i++) verdicts.push((await memory.consume('k', quota, ban)).verdict);
      expect(verdicts.at(-1)).toBe('banned');
      store.now = T0 + 900_000 + 1000;
      expect((await memory.consume('k', quota, ban)).verdict).toBe('allowed');
    })();
  });

  it('lifts a ban on unban, in the memory store', async () => {
    const memory = new MemoryQuotaStore(() => T0);
    for (let i = 0; i < 6; i++) await memory.consume('k', quota, ban);
    expect((await memory.usage('k')).verdict).toBe('banned');
    expect(await memory.unban('k')).toBe(true);
    expect((await memory.usage('k')).verdict).toBe('allowed');
    expect(await memory.unban('k')).toBe(false);
  });

  it('forgets counted refusals on unban even when the key was not banned (as the Redis store does)', async () => {
    const memory = new MemoryQuotaStore(() => T0);
    for (let i = 0; i < 5; i++) await memory.consume('k', quota, ban);
    expect((await memory.usage('k')).rejections).toBe(2);
    expect(await memory.unban('k')).toBe(false);
    expect((await memory.usage('k')).rejections).toBe(0);
    expect((await memory.consume('k', quota, ban)).verdict).toBe('limited');
  });

  it('keeps the UTC-day budget under gcra in the memory store: 60 in each of minutes 2 and 3, not one per 92 s (issue 21)', async () => {
    const smooth = { perMinute: 60, perDay: 1000, algorithm: 'gcra' as const };
    const clock = { nowMs: T0 };
    const memory = new MemoryQuotaStore(() => clock.nowMs);
    const admitted = [0, 0, 0];
    for (let second = 0; second < 180; second++) {
      clock.nowMs = T0 + second * 1000;
      if ((await memory.consume('k', smooth, ban)).verdict === 'allowed') admitted[Math.floor(second / 60)]! += 1;
    }
    expect(admitted).toEqual([60, 60, 60]);
    expect(await memory.usage('k')).toMatchObject({ verdict: 'allowed', dayCount: 180 });
  });
});

describe('month windows', () => {
  const monthly = { perMinute: 3, perDay: 3, perMonth: 5 };

  it('admits perMonth units in a month over several days, consuming nothing when the month refuses', () => {
    const nextDay = T0 - (T0 % DAY_MS) + DAY_MS;
    const outcomes = run([T0, T0 + 1, T0 + 2, nextDay, nextDay + 1, nextDay + 2, nextDay + 3], monthly);
    expect(outcomes.map((o) => o.verdict)).toEqual(['allowed', 'allowed', 'allowed', 'allowed', 'allowed', 'limited', 'limited']);
    expect(outcomes.at(-1)).toMatchObject({ minuteCount: 2, dayCount: 2, monthCount: 5 });
    expect(retryAfterSeconds(monthly, outcomes.at(-1)!)).toBe(Math.ceil((Date.UTC(2026, 11, 1) - (nextDay + 3)) / 1000));
  });

  it('begins a new month at its first instant in the zone: the month of Berlin, not of UTC', () => {
    const berlin = { ...monthly, calendar: { timeZone: 'Europe/Berlin' } };
    // December begins in Berlin at 2026-11-30T23:00Z, while it is still November in UTC.
    const december = Date.UTC(2026, 10, 30, 23);
    const minute = MINUTE_MS;
    const outcomes = run(
      [
        december - DAY_MS - minute,
        december - DAY_MS - minute + 1,
        december - DAY_MS - minute + 2,
        december - minute,
        december - minute + 1,
        december - 1,
        december,
      ],
      berlin,
    );
    expect(outcomes.map((o) => o.verdict)).toEqual(['allowed', 'allowed', 'allowed', 'allowed', 'allowed', 'limited', 'allowed']);
    expect(retryAfterSeconds(berlin, outcomes[5]!)).toBe(1);
    expect(outcomes.at(-1)).toMatchObject({ dayCount: 1, monthCount: 1 });
  });

  it('counts no month under a quota without perMonth, and keeps its state no longer than the day', () => {
    const [outcome] = run([T0]);
    expect(outcome!.monthCount).toBe(0);
    const { state } = decide(EMPTY_STATE, T0, quota, ban);
    expect(expiresAtMs(state, ban)).toBe(T0 - (T0 % DAY_MS) + DAY_MS);
    const monthlyState = decide(EMPTY_STATE, T0, monthly, ban).state;
    expect(expiresAtMs(monthlyState, ban)).toBe(Date.UTC(2026, 11, 1));
  });
});

describe('rate-limit headers', () => {
  const at = (minuteCount: number, dayCount: number, nowMs = T0) =>
    ({ verdict: 'allowed', minuteCount, dayCount, rejections: 0, nowMs, bannedUntilMs: 0, cost: 1, minuteTatUs: 0 }) as const;

  it('report the minute window when it binds, with Reset in Unix seconds', () => {
    const headers = rateLimitHeaders({ perMinute: 60, perDay: 1000 }, at(48, 100));
    const minuteEnd = (T0 - (T0 % MINUTE_MS) + MINUTE_MS) / 1000;
    expect(headers).toEqual({
      'x-ratelimit-limit': '60',
      'x-ratelimit-remaining': '12',
      'x-ratelimit-reset': String(minuteEnd),
      'ratelimit-policy': '"minute";q=60;w=60, "day";q=1000;w=86400',
      ratelimit: '"minute";r=12;t=50',
    });
  });

  it('report the day window when it has fewer remaining', () => {
    const headers = rateLimitHeaders({ perMinute: 60, perDay: 1000 }, at(1, 995));
    expect(headers['x-ratelimit-limit']).toBe('1000');
    expect(headers['x-ratelimit-remaining']).toBe('5');
    expect(headers['x-ratelimit-reset']).toBe(String((T0 - (T0 % DAY_MS) + DAY_MS) / 1000));
    expect(headers.ratelimit).toMatch(/^"day";r=5;t=\d+$/);
  });

  it('report the window that resets later on a tie', () => {
    const headers = rateLimitHeaders({ perMinute: 10, perDay: 10 }, at(4, 4));
    expect(headers.ratelimit).toMatch(/^"day";r=6;t=\d+$/);
  });

  it('round t and Retry-After up to whole seconds, never below 1', () => {
    const nearlyNextMinute = T0 - (T0 % MINUTE_MS) + MINUTE_MS - 200;
    const outcome = {
      verdict: 'limited',
      minuteCount: 3,
      dayCount: 3,
      rejections: 1,
      nowMs: nearlyNextMinute,
      bannedUntilMs: 0,
      cost: 1,
      minuteTatUs: 0,
    } as const;
    expect(retryAfterSeconds(quota, outcome)).toBe(1);
    expect(rateLimitHeaders(quota, outcome).ratelimit).toBe('"minute";r=0;t=1');
  });

  it('show nothing remaining until the ban ends while banned', () => {
    const outcome = {
      verdict: 'banned',
      minuteCount: 0,
      dayCount: 3,
      rejections: 0,
      nowMs: T0,
      bannedUntilMs: T0 + 600_000,
      cost: 1,
      minuteTatUs: 0,
    } as const;
    const headers = rateLimitHeaders(quota, outcome);
    expect(headers['x-ratelimit-remaining']).toBe('0');
    expect(headers['x-ratelimit-reset']).toBe(String(Math.ceil((T0 + 600_000) / 1000)));
    expect(retryAfterSeconds(quota, outcome)).toBe(600);
  });
});
