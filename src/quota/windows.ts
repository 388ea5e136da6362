// Fixed windows aligned to UTC: a minute window starts at second :00, a day window at 00:00:00
// UTC. Every replica (and Redis, whose clock the shared counters use) agrees on where a window
// starts, so counters are exact across replicas. Units are in every name.

export const MINUTE_MS = 60_000;
export const DAY_MS = 86_400_000;

export function windowStartMs(nowMs: number, windowMs: number): number {
  return nowMs - (nowMs % windowMs);
}

export function windowEndMs(nowMs: number, windowMs: number): number {
  return windowStartMs(nowMs, windowMs) + windowMs;
}

/** Whole seconds until `untilMs`, rounded up and never below 1 (for Retry-After and `t=`). */
export function secondsUntil(untilMs: number, nowMs: number): number {
  return Math.max(1, Math.ceil((untilMs - nowMs) / 1000));
}
