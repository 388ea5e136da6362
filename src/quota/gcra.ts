import type { Quota } from '../config/plans-schema.js';
import { MINUTE_MS } from './windows.js';

/**
 * The minute of a plan with `algorithm: gcra`, as a generic cell rate (GCRA): a request of `cost`
 * units is admitted when, after it, the theoretical arrival time (TAT) is at most `burst` emission
 * intervals ahead of now; each admitted unit pushes the TAT one interval on.
 *
 * The promise is the fixed minute's, made about every span instead of UTC-aligned ones: never more
 * than `limit` units in any 60-second span. Admitted units over a span of s are at most
 * burst + s / interval (the bucket holds `burst` intervals and drains one interval per interval),
 * so an interval of 60 s / (limit − burst + 1) keeps every span shorter than a minute to
 * burst + limit − burst + 1 − ε, that is at most `limit`. Bursting costs sustained rate: a client
 * may send `burst` at once, then limit − burst + 1 per minute. The interval is rounded up to a whole
 * microsecond (so it is exact in Lua and JS alike, and the promise only gets stricter). The burst
 * is the plan's (at most perMinute; a per-key quota below the plan's burst gets a burst of its
 * perMinute).
 *
 * The day is not a cell rate: under gcra it is the fixed algorithm's UTC-day budget, `perDay` units
 * from 00:00 UTC to the next (quota-state.ts counts it for both algorithms). A day spread evenly
 * over 24 h (as it once was here: burst perMinute, one unit every 86,400 s / (perDay − perMinute
 * + 1)) turned a 60/min, 1000/day plan into one request per 92 s after its first minute (issue 21);
 * what a plan sells is a daily budget, and the minute already keeps its use smooth.
 */
export interface GcraWindow {
  limit: number;
  burst: number;
  intervalUs: number;
}

export function gcraMinute(quota: Quota): GcraWindow {
  const burst = Math.min(quota.burst ?? 1, quota.perMinute);
  return { limit: quota.perMinute, burst, intervalUs: Math.ceil((MINUTE_MS * 1000) / (quota.perMinute - burst + 1)) };
}

/** The TAT after admitting `cost` units at `nowUs`, or null when they do not fit. */
export function admitUs(window: GcraWindow, tatUs: number, nowUs: number, cost: number): number | null {
  const next = Math.max(tatUs, nowUs) + cost * window.intervalUs;
  return next - nowUs <= window.burst * window.intervalUs ? next : null;
}

/** Units that can be sent at `nowUs` (what `remaining` means for a gcra minute). */
export function remainingAt(window: GcraWindow, tatUs: number, nowUs: number): number {
  const backlogUs = Math.max(tatUs - nowUs, 0);
  return Math.max(0, Math.floor((window.burst * window.intervalUs - backlogUs) / window.intervalUs));
}

/** When `units` more than fit now would fit: the TAT less what the bucket may hold besides them. */
export function fitsAtUs(window: GcraWindow, tatUs: number, units: number): number {
  return tatUs - (window.burst - units) * window.intervalUs;
}
