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

/** Both windows as of the outcome; the binding one first (fewest remaining, the shorter on a tie). */
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
  return day.remaining < minute.remaining ? [day, minute] : [minute, day];
}

/**
 * The rate-limit fields of a response to an identified caller:
 * - X-RateLimit-Limit / -Remaining / -Reset (Unix seconds) for the window that binds first;
 * - RateLimit-Policy (both windows) and RateLimit (the binding one), as in
 *   draft-ietf-httpapi-ratelimit-headers-11: `"minute";q=60;w=60` and `"minute";r=12;t=41`.
 * While banned, Remaining is 0 and Reset is the end of the ban: no request can succeed before.
 */
export function rateLimitHeaders(quota: Quota, outcome: QuotaOutcome): Record<string, string> {
  const [binding] = windowsOf(quota, outcome);
  const banned = outcome.verdict === 'banned';
  const remaining = banned ? 0 : binding.remaining;
  const resetAtMs = banned ? outcome.bannedUntilMs : binding.resetAtMs;
  const resetSeconds = secondsUntil(resetAtMs, outcome.nowMs);
  return {
    'x-ratelimit-limit': String(binding.limit),
    'x-ratelimit-remaining': String(remaining),
    'x-ratelimit-reset': String(Math.ceil(resetAtMs / 1000)),
    'ratelimit-policy': `"minute";q=${quota.perMinute};w=60, "day";q=${quota.perDay};w=86400`,
    ratelimit: `"${binding.name}";r=${remaining};t=${resetSeconds}`,
  };
}

/**
 * Whole seconds (≥ 1) until a request can next succeed: the end of the ban; else the end of
 * every exhausted window (the day's if the day is used up, since a new minute will not help).
 */
export function retryAfterSeconds(quota: Quota, outcome: QuotaOutcome): number {
  if (outcome.verdict === 'banned') return secondsUntil(outcome.bannedUntilMs, outcome.nowMs);
  let untilMs = outcome.nowMs;
  if (outcome.minuteCount >= quota.perMinute) untilMs = Math.max(untilMs, windowEndMs(outcome.nowMs, MINUTE_MS));
  if (outcome.dayCount >= quota.perDay) untilMs = Math.max(untilMs, windowEndMs(outcome.nowMs, DAY_MS));
  return secondsUntil(untilMs, outcome.nowMs);
}
