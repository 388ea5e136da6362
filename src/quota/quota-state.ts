import type { BanPolicy, Quota } from '../config/plans-schema.js';
import { DAY_MS, MINUTE_MS, windowStartMs } from './windows.js';

/**
 * The quota decision as a pure function of one key's state and the time. The memory store runs
 * it directly; the Redis store runs the same steps in one Lua script (quota-script.ts), field for
 * field, so both stores behave alike. Keep the two in step.
 */
export interface QuotaState {
  minuteStartMs: number;
  minuteCount: number;
  dayStartMs: number;
  dayCount: number;
  rejectionsStartMs: number;
  rejections: number;
  bannedUntilMs: number;
}

export type Verdict = 'allowed' | 'limited' | 'banned';

export interface QuotaOutcome {
  verdict: Verdict;
  /** Requests counted in the current minute and day windows (after this one, if allowed). */
  minuteCount: number;
  dayCount: number;
  /** The store's clock when it decided: windows and resets are computed from it. */
  nowMs: number;
  /** When banned: the end of the ban. */
  bannedUntilMs: number;
}

export const EMPTY_STATE: QuotaState = Object.freeze({
  minuteStartMs: 0,
  minuteCount: 0,
  dayStartMs: 0,
  dayCount: 0,
  rejectionsStartMs: 0,
  rejections: 0,
  bannedUntilMs: 0,
});

/** The state as of `nowMs`: counters of windows that have ended read as zero. */
export function current(previous: QuotaState, nowMs: number): QuotaState {
  const state = { ...previous };
  const minuteStartMs = windowStartMs(nowMs, MINUTE_MS);
  const dayStartMs = windowStartMs(nowMs, DAY_MS);
  if (state.minuteStartMs !== minuteStartMs) Object.assign(state, { minuteStartMs, minuteCount: 0 });
  if (state.dayStartMs !== dayStartMs) Object.assign(state, { dayStartMs, dayCount: 0 });
  return state;
}

/** Use without consuming: the verdict is `banned` or `allowed` (whether the next fits is the caller's sum). */
export function peek(previous: QuotaState, nowMs: number): QuotaOutcome {
  const state = current(previous, nowMs);
  const banned = state.bannedUntilMs > nowMs;
  return {
    verdict: banned ? 'banned' : 'allowed',
    minuteCount: state.minuteCount,
    dayCount: state.dayCount,
    nowMs,
    bannedUntilMs: banned ? state.bannedUntilMs : 0,
  };
}

/**
 * `cost` 1: one request. Both windows are checked, then both consumed, or neither (a refused
 * request consumes nothing). A refusal counts as a rejection towards a ban; `cost` 0 with
 * `rejections` > 0 only reports rejections answered elsewhere (from a replica's local cache).
 */
export function decide(
  previous: QuotaState,
  nowMs: number,
  quota: Quota,
  ban: BanPolicy,
  cost: number,
  reportedRejections = 0,
): { state: QuotaState; outcome: QuotaOutcome } {
  const state = current(previous, nowMs);
  const outcome = (verdict: Verdict): QuotaOutcome => ({
    verdict,
    minuteCount: state.minuteCount,
    dayCount: state.dayCount,
    nowMs,
    bannedUntilMs: verdict === 'banned' ? state.bannedUntilMs : 0,
  });

  if (state.bannedUntilMs > nowMs) return { state, outcome: outcome('banned') };
  if (cost > 0 && state.minuteCount + cost <= quota.perMinute && state.dayCount + cost <= quota.perDay) {
    state.minuteCount += cost;
    state.dayCount += cost;
    return { state, outcome: outcome('allowed') };
  }

  if (nowMs - state.rejectionsStartMs >= ban.window * 1000) {
    state.rejectionsStartMs = nowMs;
    state.rejections = 0;
  }
  state.rejections += cost > 0 ? 1 : reportedRejections;
  if (state.rejections >= ban.afterRejections) {
    state.bannedUntilMs = nowMs + ban.duration * 1000;
    state.rejections = 0;
    state.rejectionsStartMs = 0;
    return { state, outcome: outcome('banned') };
  }
  return { state, outcome: outcome('limited') };
}
