import type { Quota } from '../config/plans-schema.js';
import type { QuotaOutcome } from './quota-state.js';
import { DAY_MS, MINUTE_MS, secondsUntil, windowEndMs } from './windows.js';

export interface WindowReport {
  name: 'minute' | 'day';
  limit: number;
  remaining: number;
  windowSeconds: number;
  resetAtMs: number;
}

/**
 * Both windows as of the outcome, the binding one first: the fewest remaining and, on a tie, the
 * one that resets later (the day when both end at midnight). When both are used up, a new minute
 * does not let a request through, the new day does: so the day is reported. Counts are units
 * (routes.costs): when neither window has room for another request of this one's cost, the one
 * that resets later binds, whatever it has left, since only its reset lets that request through.
 */
export function windowsOf(quota: Quota, outcome: QuotaOutcome): [WindowReport, WindowReport] {
  const minute: WindowReport = {
    name: 'minute',
    limit: quota.perMinute,
    remaining: Math.max(0, quota.perMinute - outcome.minuteCount),
    windowSeconds: MINUTE_MS / 1000,
    resetAtMs: windowEndMs(outcome.nowMs, MINUTE_MS),
  };
  const day: WindowReport = {
    name: 'day',
    limit: quota.perDay,
    remaining: Math.max(0, quota.perDay - outcome.dayCount),
    windowSeconds: DAY_MS / 1000,
    resetAtMs: windowEndMs(outcome.nowMs, DAY_MS),
  };
  const bothShort = minute.remaining < outcome.cost && day.remaining < outcome.cost;
  const laterReset = minute.resetAtMs > day.resetAtMs;
  const minuteBinds = bothShort ? laterReset : minute.remaining < day.remaining || (minute.remaining === day.remaining && laterReset);
  return minuteBinds ? [minute, day] : [day, minute];
}

/** What the headers report: the binding window, or while banned that window ending with the ban. */
export function reportedWindow(quota: Quota, outcome: QuotaOutcome): WindowReport {
  const [binding] = windowsOf(quota, outcome);
  if (outcome.verdict !== 'banned') return binding;
  return { ...binding, remaining: 0, resetAtMs: outcome.bannedUntilMs };
}

/**
 * The rate-limit fields of a response to an identified caller:
 * - X-RateLimit-Limit / -Remaining / -Reset (Unix seconds) for the binding window;
 * - RateLimit-Policy (both windows) and RateLimit (the binding one), as in
 *   draft-ietf-httpapi-ratelimit-headers-11: `"minute";q=60;w=60` and `"minute";r=12;t=41`.
 * While banned, Remaining is 0 and Reset is the end of the ban: no request can succeed before.
 */
export function rateLimitHeaders(quota: Quota, outcome: QuotaOutcome): Record<string, string> {
  const window = reportedWindow(quota, outcome);
  return {
    'x-ratelimit-limit': String(window.limit),
    'x-ratelimit-remaining': String(window.remaining),
    'x-ratelimit-reset': String(Math.ceil(window.resetAtMs / 1000)),
    'ratelimit-policy': `"minute";q=${quota.perMinute};w=${MINUTE_MS / 1000}, "day";q=${quota.perDay};w=${DAY_MS / 1000}`,
    ratelimit: `"${window.name}";r=${window.remaining};t=${secondsUntil(window.resetAtMs, outcome.nowMs)}`,
  };
}

/**
 * Whole seconds (≥ 1) until a request can next succeed: the reset the headers report. A refusal
 * means a window is used up; the binding window is then the used-up one that resets last, so
 * Retry-After, X-RateLimit-Reset and RateLimit's `t` name the same moment.
 */
export function retryAfterSeconds(quota: Quota, outcome: QuotaOutcome): number {
  return secondsUntil(reportedWindow(quota, outcome).resetAtMs, outcome.nowMs);
}
