import type { BanPolicy, Quota } from '../config/plans-schema.js';
import type { Calendar } from '../config/calendar-fields.js';
import { periodsAt, pick } from './calendar.js';
import { admitUs, gcraMinute } from './gcra.js';
import { MINUTE_MS, windowStartMs } from './windows.js';

/**
 * The quota rules, once: one key's state and the time in, the decision and the next state out.
 * The memory store runs these functions; the Redis store runs their transcription in one Lua
 * script (src/store/redis/quota-script.ts), whose window lengths are interpolated from
 * windows.ts and whose day and month edges the gateway passes from calendar.ts (the script picks
 * among them by its own clock, as `current` does here). test/integration/quota-stores-differential.test.ts runs both on random histories
 * and requires identical answers, so a change here that the script does not follow fails there.
 */
export interface QuotaState {
  minuteStartMs: number;
  minuteCount: number;
  dayStartMs: number;
  dayCount: number;
  /** The end of the day that began at dayStartMs (days in a zone are 23 to 25 hours; not stored). */
  dayEndMs: number;
  /** The month window (calendar.ts), counted only under a quota with `perMonth`. */
  monthStartMs: number;
  monthCount: number;
  /** Its end (not stored). */
  monthEndMs: number;
  rejectionsStartMs: number;
  rejections: number;
  bannedUntilMs: number;
  /** gcra plans: the minute's theoretical arrival time, in µs (gcra.ts); else kept as it was. */
  minuteTatUs: number;
  /**
   * The prepaid credit balance (changed by operators, spent under a `credits: required` quota).
   * Never expires with the windows: the stores keep it when the rest of the state reads as empty.
   */
  creditBalance: number;
}

/**
 * `unfunded`: the windows had room, the credit balance did not (402; nothing spent or counted).
 * `concurrent`: the windows had room, no concurrency slot was free (429; nothing charged or counted).
 */
export type Verdict = 'allowed' | 'limited' | 'banned' | 'unfunded' | 'concurrent';

export interface QuotaOutcome {
  verdict: Verdict;
  /** Units counted in the current minute and day (after this request, if allowed), whatever the algorithm. */
  minuteCount: number;
  dayCount: number;
  /** Units counted in the current month (0 under a quota without `perMonth`; absent: 0). */
  monthCount?: number;
  /** Refusals counted towards a ban in the current ban window (0 once banned). */
  rejections: number;
  /** The store's clock when it decided: windows and resets are computed from it. */
  nowMs: number;
  /** When banned: the end of the ban; else 0. */
  bannedUntilMs: number;
  /** Units the request asked for (its route's cost; 1 for a usage read): what "fits" means. */
  cost: number;
  /** The state's minute theoretical arrival time (gcra plans; µs). */
  minuteTatUs: number;
  /** The credit balance after this request (absent: 0). */
  creditBalance?: number;
  /**
   * Redis, while a lease of the key may be out: the notice sequence number of this decision
   * (quota-leases.ts, rule 10); what a lease granted before it holds is counted in it. Absent: none.
   */
  seq?: number;
  /** gcra: the number of the last move down of the TAT the store had made when it decided (TatMove); absent: 0. */
  moveNo?: number;
}

export const EMPTY_STATE: QuotaState = Object.freeze({
  minuteStartMs: 0,
  minuteCount: 0,
  dayStartMs: 0,
  dayCount: 0,
  dayEndMs: 0,
  monthStartMs: 0,
  monthCount: 0,
  monthEndMs: 0,
  rejectionsStartMs: 0,
  rejections: 0,
  bannedUntilMs: 0,
  minuteTatUs: 0,
  creditBalance: 0,
});

/**
 * The state as of `nowMs`: counters of windows that have ended, and a TAT that has passed, read as
 * zero. The day and the month are the periods of `calendar` that `nowMs` falls in.
 */
export function current(previous: QuotaState, nowMs: number, calendar?: Calendar): QuotaState {
  const state = { ...previous };
  const minuteStartMs = windowStartMs(nowMs, MINUTE_MS);
  const periods = periodsAt(nowMs, calendar);
  const [dayStartMs, dayEndMs] = pick(periods.day, nowMs);
  const [monthStartMs, monthEndMs] = pick(periods.month, nowMs);
  if (state.minuteStartMs !== minuteStartMs) Object.assign(state, { minuteStartMs, minuteCount: 0 });
  if (state.dayStartMs !== dayStartMs) Object.assign(state, { dayStartMs, dayCount: 0 });
  if (state.monthStartMs !== monthStartMs) Object.assign(state, { monthStartMs, monthCount: 0 });
  Object.assign(state, { dayEndMs, monthEndMs });
  // A TAT not ahead of now admits as none does: it reads as 0, so states that decide alike look alike.
  if (state.minuteTatUs <= nowMs * 1000) state.minuteTatUs = 0;
  return state;
}

function outcomeOf(state: QuotaState, nowMs: number, verdict: Verdict, cost: number): QuotaOutcome {
  return {
    verdict,
    minuteCount: state.minuteCount,
    dayCount: state.dayCount,
    rejections: state.rejections,
    nowMs,
    bannedUntilMs: verdict === 'banned' ? state.bannedUntilMs : 0,
    cost,
    minuteTatUs: state.minuteTatUs,
    monthCount: state.monthCount,
    creditBalance: state.creditBalance,
  };
}

/** Use without consuming: the verdict is `banned` or `allowed` (whether the next fits is the caller's sum). */
export function peek(previous: QuotaState, nowMs: number, calendar?: Calendar): QuotaOutcome {
  const state = current(previous, nowMs, calendar);
  return outcomeOf(state, nowMs, state.bannedUntilMs > nowMs ? 'banned' : 'allowed', 1);
}

/**
 * One request of `cost` units (gateway.yaml `routes.costs`; 1 by default). Every window (the
 * minute, the day, and the month under a quota with `perMonth`) is checked, then all are consumed
 * by `cost`, or none (a refused request consumes nothing, however
 * much of its cost would have fitted). The day (and the month) is a budget of `perDay` units per day of the quota's calendar under both
 * algorithms; a `gcra` plan checks its minute by cell rate (gcra.ts) instead of by the UTC minute's
 * count (which is kept all the same, for usage reports). A refusal counts towards a ban: the `afterRejections`-th
 * refusal within `window` seconds of the first is answered `banned`, and the ban lasts `duration`
 * seconds. A shadow quota (`shadow: true`) decides the same way but counts no refusal: the gateway
 * admits its refusals, and a client never told 429 cannot be expected to back off (README,
 * "Shadow plans"). Under `credits: required` an admitted request also spends its cost from the
 * credit balance, and a request the balance cannot cover is `unfunded` (after a ban, before any
 * window): it changes nothing.
 * `takeSlot`, under a quota with `maxConcurrent`, takes a concurrency slot once every window has
 * room: false (none free) answers `concurrent`, which charges nothing and counts towards no ban.
 */
export function decide(
  previous: QuotaState,
  nowMs: number,
  quota: Quota,
  ban: BanPolicy,
  cost = 1,
  takeSlot?: () => boolean,
): { state: QuotaState; outcome: QuotaOutcome } {
  const state = current(previous, nowMs, quota.calendar);
  // A ban in force changes nothing (the script writes nothing): the state stays as it was, which
  // matters once a reload moves the day or month to another calendar.
  if (state.bannedUntilMs > nowMs) return { state: previous, outcome: outcomeOf(state, nowMs, 'banned', cost) };
  // A balance that cannot pay is refused before any window: waiting would not help, a top-up
  // will, so it consumes nothing and counts towards no ban; the state stays as it was.
  const credits = quota.credits === 'required';
  if (credits && state.creditBalance < cost) return { state: previous, outcome: outcomeOf(state, nowMs, 'unfunded', cost) };
  const dayFits = state.dayCount + cost <= quota.perDay;
  const monthFits = quota.perMonth === undefined || state.monthCount + cost <= quota.perMonth;
  let minuteFits: boolean;
  let minuteTatUs: number | null = null;
  if (quota.algorithm === 'gcra') {
    minuteTatUs = admitUs(gcraMinute(quota), state.minuteTatUs, nowMs * 1000, cost);
    minuteFits = minuteTatUs !== null;
  } else {
    minuteFits = state.minuteCount + cost <= quota.perMinute;
  }
  if (minuteFits && dayFits && monthFits) {
    if (takeSlot && !takeSlot()) return { state: previous, outcome: outcomeOf(state, nowMs, 'concurrent', cost) };
    state.minuteCount += cost;
    state.dayCount += cost;
    if (quota.perMonth !== undefined) state.monthCount += cost;
    if (minuteTatUs !== null) state.minuteTatUs = minuteTatUs;
    if (credits) state.creditBalance -= cost;
    return { state, outcome: outcomeOf(state, nowMs, 'allowed', cost) };
  }
  if (quota.shadow) return { state, outcome: outcomeOf(state, nowMs, 'limited', cost) };
  if (nowMs - state.rejectionsStartMs >= ban.window * 1000) {
    state.rejectionsStartMs = nowMs;
    state.rejections = 0;
  }
  state.rejections += 1;
  if (state.rejections >= ban.afterRejections) {
    state.bannedUntilMs = nowMs + ban.duration * 1000;
    state.rejections = 0;
    state.rejectionsStartMs = 0;
    return { state, outcome: outcomeOf(state, nowMs, 'banned', cost) };
  }
  return { state, outcome: outcomeOf(state, nowMs, 'limited', cost) };
}

/** An operator lifts the ban and forgives the counted refusals, banned or not. */
export function lift(previous: QuotaState, nowMs: number): { state: QuotaState; wasBanned: boolean } {
  const wasBanned = previous.bannedUntilMs > nowMs;
  return { state: { ...previous, bannedUntilMs: 0, rejections: 0, rejectionsStartMs: 0 }, wasBanned };
}

/**
 * When a stored state may be dropped: once the day window, the month window if it counted any, the ban window of its refusals, its
 * ban and its minute's theoretical arrival time (a TAT in the past admits as an empty one does) have all
 * ended, it reads exactly like EMPTY_STATE. Both stores drop state at this
 * moment (Redis by PEXPIREAT), so they forget the same things at the same time.
 */
export function expiresAtMs(state: QuotaState, ban: BanPolicy): number {
  const rejectionsEndMs = state.rejections > 0 ? state.rejectionsStartMs + ban.window * 1000 : 0;
  const tatEndMs = Math.ceil(state.minuteTatUs / 1000);
  const monthEndMs = state.monthCount > 0 ? state.monthEndMs : 0;
  return Math.max(state.dayEndMs, monthEndMs, rejectionsEndMs, state.bannedUntilMs, tatEndMs);
}

/**
 * A reservation settled to the cost the upstream reported (gateway/reported-cost/): `reserve`
 * units were consumed when the request was admitted, in the windows that began at the given
 * starts; the answer cost `cost` (already capped at the rule's `max`).
 */
export interface Settlement {
  reserve: number;
  cost: number;
  minuteStartMs: number;
  dayStartMs: number;
  /** The reservation's month (ignored under a quota without `perMonth`). */
  monthStartMs: number;
  /**
   * gcra: the TAT the reservation left, as the store decided it (µs): its unused cells are its top
   * slots below it. 0 or absent (admitted from a lease's block, or unknown): none come off the TAT.
   */
  tatUs?: number;
  /**
   * gcra: the store's clock when the reservation was admitted: the TAT's moves down since then
   * (TatMove) that lay below it moved it down too. Absent (a replica of an earlier version): where
   * its cells are now is unknown, and none come off the TAT.
   */
  admittedAtMs?: number;
  /** gcra: the admission's QuotaOutcome.moveNo: the moves numbered after it are those since (absent: 0). */
  admittedMoveNo?: number;
}

/**
 * gcra: the TAT moved down (a settled reservation's refund, a lease block given back): the freed
 * slots [posUs − amountUs, posUs) came off, and every cell above them moved down by amountUs. A
 * store keeps the moves of the last tolerance τ, in order, so that a reservation settled later knows
 * where its own cells are now: its recorded end is stale once a move below it happened (taking it
 * as it was freed slots that were no longer its own: 29 admitted in a moment where burst is 20).
 */
export interface TatMove {
  /** Its number: one more than the key's move before it. */
  no: number;
  posUs: number;
  amountUs: number;
}

/**
 * gcra: the TAT's moves down a store keeps per key: a reservation settled after more moves than
 * this gives no cells back (conservative); a settlement reads at most this many.
 */
export const TAT_MOVES_KEPT = 1024;

/** A key's moves of the TAT as a store keeps them: the last one's number, and those kept (in order, the newest last). */
export interface TatMoves {
  lastNo: number;
  kept: readonly TatMove[];
}

/**
 * gcra: where a reservation that left the TAT at `endUs` ends now, after `moves` (in order, those
 * since its admission): each move below it (cells disjoint: its freed slots end at or below the
 * reservation's start) moved it down; one above it did not.
 */
export function movedEndUs(endUs: number, moves: readonly TatMove[]): number {
  let end = endUs;
  for (const move of moves) if (move.posUs < end) end -= move.amountUs;
  return end;
}

/**
 * gcra: the cells that come off the TAT when a reservation ending at `endUs` now (movedEndUs)
 * gives `back` cells back. They are its top slots, [endUs − back × T, endUs). With nothing above
 * it (the TAT is endUs) they all come off. Otherwise every cell above moves down by what comes
 * off, and must stay on a slot after its use (at most now): only the freed slots at or after now
 * come off. (Taking them all moved cells below their use: 605 in a moment where burst is 600.) A
 * TAT below endUs, or an unknown end: none. The TAT then falls by them; to now or below: 0.
 */
function refundedCells(tatUs: number, endUs: number, back: number, intervalUs: number, nowUs: number): number {
  if (tatUs <= nowUs || endUs <= 0 || tatUs < endUs) return 0;
  return tatUs === endUs ? back : Math.min(back, Math.max(0, Math.floor((endUs - nowUs) / intervalUs)));
}

/**
 * The rule of a settlement, once (the Redis store runs its transcription, SETTLE_SCRIPT). The
 * extra of a cost above the reservation is charged to the current windows even past their limits
 * (the upstream has done the work; later requests are refused), and under `credits: required` to
 * the balance, but never below zero: what the balance cannot hold is the `shortfall`. The rest of
 * a reservation above the cost is given back only to the windows it was taken from (one that has
 * rolled over since is not credited, as a lease's give-back), never below zero, and to the
 * balance whole. No ban and no refusal is counted either way; a ban in force does not stop it.
 */
export function settle(
  previous: QuotaState,
  nowMs: number,
  quota: Quota,
  settlement: Settlement,
  /** gcra: the TAT's moves the store keeps; those numbered after the admission's apply. */
  moves: TatMoves = { lastNo: 0, kept: [] },
): { state: QuotaState; shortfall: number; move?: Omit<TatMove, 'no'> } {
  const state = current(previous, nowMs, quota.calendar);
  const delta = settlement.cost - settlement.reserve;
  const month = quota.perMonth !== undefined;
  const credits = quota.credits === 'required';
  const gcra = quota.algorithm === 'gcra';
  const nowUs = nowMs * 1000;
  let shortfall = 0;
  let move: Omit<TatMove, 'no'> | undefined;
  if (delta > 0) {
    state.minuteCount += delta;
    state.dayCount += delta;
    if (month) state.monthCount += delta;
    if (gcra) state.minuteTatUs = Math.max(state.minuteTatUs, nowUs) + delta * gcraMinute(quota).intervalUs;
    if (credits) {
      const taken = Math.min(delta, state.creditBalance);
      state.creditBalance -= taken;
      shortfall = delta - taken;
    }
  } else if (delta < 0) {
    const back = -delta;
    if (state.minuteStartMs === settlement.minuteStartMs) state.minuteCount = Math.max(0, state.minuteCount - back);
    if (state.dayStartMs === settlement.dayStartMs) state.dayCount = Math.max(0, state.dayCount - back);
    if (month && state.monthStartMs === settlement.monthStartMs) state.monthCount = Math.max(0, state.monthCount - back);
    if (gcra) {
      const minute = gcraMinute(quota);
      const endUs = reservationEndUs(settlement, moves, minute, nowMs);
      const cells = refundedCells(state.minuteTatUs, endUs, back, minute.intervalUs, nowUs);
      if (cells > 0) {
        const after = state.minuteTatUs - cells * minute.intervalUs;
        state.minuteTatUs = after <= nowUs ? 0 : after;
        move = { posUs: endUs, amountUs: cells * minute.intervalUs };
      }
    }
    if (credits) state.creditBalance += back;
  }
  return { state, shortfall, move };
}

/**
 * gcra: a settled reservation's end now (movedEndUs), or 0 (none comes off) when where it is is
 * unknown: admitted longer than τ ago (its cells all lie before now: a cell admitted at u has its
 * slot before u + τ), at an unknown time, or with a move since that the store no longer keeps.
 */
function reservationEndUs(settlement: Settlement, moves: TatMoves, minute: { intervalUs: number; burst: number }, nowMs: number): number {
  const endUs = settlement.tatUs ?? 0;
  const sinceMs = settlement.admittedAtMs ?? 0;
  if (endUs <= 0 || nowMs * 1000 - sinceMs * 1000 > minute.burst * minute.intervalUs) return 0;
  const sinceNo = settlement.admittedMoveNo ?? 0;
  const since = moves.kept.filter((m) => m.no > sinceNo);
  if (since.length !== moves.lastNo - sinceNo) return 0;
  return movedEndUs(endUs, since);
}
