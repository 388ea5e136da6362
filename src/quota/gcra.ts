import type { Quota } from '../config/plans-schema.js';
import { DAY_MS, MINUTE_MS } from './windows.js';

/**
 * The generic cell rate algorithm (GCRA) of a plan with `algorithm: gcra`, per window: a request
 * of `cost` units is admitted when, after it, the window's theoretical arrival time (TAT) is at
 * most `burst` emission intervals ahead of now; each admitted unit pushes the TAT one interval on.
 *
 * The promise is the fixed window's, made about every span instead of UTC-aligned ones: never more
 * than `limit` units in any window-long span. Admitted units over a span of s are at most
 * burst + s / interval (the bucket holds `burst` intervals and drains one interval per interval),
 * so an interval of window / (limit − burst + 1) keeps every span shorter than the window to
 * burst + limit − burst + 1 − ε, that is at most `limit`. Bursting costs sustained rate: a client
 * may send `burst` at once, then limit − burst + 1 per window. The interval is rounded up to a whole
 * microsecond (so it is exact in Lua and JS alike, and the promise only gets stricter).
 *
 * The minute uses the plan's `burst` (at most perMinute; a per-key quota below the plan's burst
 * gets a burst of its perMinute). The day's burst is perMinute: a client may spend a whole minute
 * from its day at once, and the rest of the day is spread evenly, perDay − perMinute + 1 a day.
 */
export interface GcraWindow {
  limit: number;
  burst: number;
  intervalUs: number;
}

function gcraWindow(windowMs: number, limit: number, burst: number): GcraWindow {
  return { limit, burst, intervalUs: Math.ceil((windowMs * 1000) / (limit - burst + 1)) };
}

export function gcraWindows(quota: Quota): { minute: GcraWindow; day: GcraWindow } {
  return {
    minute: gcraWindow(MINUTE_MS, quota.perMinute, Math.min(quota.burst ?? 1, quota.perMinute)),
    day: gcraWindow(DAY_MS, quota.perDay, quota.perMinute),
  };
}

/** The TAT after admitting `cost` units at `nowUs`, or null when they do not fit. */
export function admitUs(window: GcraWindow, tatUs: number, nowUs: number, cost: number): number | null {
  const next = Math.max(tatUs, nowUs) + cost * window.intervalUs;
  return next - nowUs <= window.burst * window.intervalUs ? next : null;
}

/** Units that can be sent at `nowUs` (what `remaining` means for a gcra window). */
export function remainingAt(window: GcraWindow, tatUs: number, nowUs: number): number {
  const backlogUs = Math.max(tatUs - nowUs, 0);
  return Math.max(0, Math.floor((window.burst * window.intervalUs - backlogUs) / window.intervalUs));
}

/** When `units` more than fit now would fit: the TAT less what the bucket may hold besides them. */
export function fitsAtUs(window: GcraWindow, tatUs: number, units: number): number {
  return tatUs - (window.burst - units) * window.intervalUs;
}
