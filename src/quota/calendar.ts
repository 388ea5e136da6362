import type { Calendar } from '../config/calendar-fields.js';
import { DAY_MS } from './windows.js';

/**
 * Where a day and a month begin, in a time zone (gateway.yaml `quota.timeZone`, an IANA name) and
 * for a billing anchor (the day of the month a key's month begins; 1 is the calendar month, and an
 * anchor past a month's last day begins that month on its last day).
 *
 * Lua in Redis knows no time zones, so the gateway computes the instants here (Intl) and the quota
 * script picks among them by its own clock (quota-script.ts): `Edges` are four consecutive starts,
 * [previous, current, next, the one after], around the gateway's now. Whichever of the three
 * periods Redis's clock falls in is the one it counts, so replicas whose clocks disagree by up to
 * a period still pass edges from which Redis picks the same window, and every window edge is on
 * the one clock that decides. The memory store picks with the same function on its own clock.
 *
 * Edges are memoized per zone and anchor until the gateway's clock passes the current day's end:
 * the hot path pays a map lookup and two comparisons.
 */
export type Edges = readonly [number, number, number, number];

export interface Periods {
  day: Edges;
  /** Month periods: calendar months (anchor 1), or from the billing anchor's day. */
  month: Edges;
}

export const UTC = 'UTC';

/** The period of `edges` that `nowMs` falls in: [start, end). Clamped to the first or last. */
export function pick(edges: Edges, nowMs: number): [number, number] {
  if (nowMs < edges[1]) return [edges[0], edges[1]];
  if (nowMs < edges[2]) return [edges[1], edges[2]];
  return [edges[2], edges[3]];
}

/** The end of the period of `edges` that `nowMs` falls in (pick's, without an array). */
export function endOf(edges: Edges, nowMs: number): number {
  return nowMs < edges[1] ? edges[1] : nowMs < edges[2] ? edges[2] : edges[3];
}

interface Memo {
  fromMs: number;
  untilMs: number;
  periods: Periods;
}

const memos = new Map<string, Memo[]>();

/** The periods around `nowMs` for a calendar (memoized for the current day). */
export function periodsAt(nowMs: number, calendar?: Calendar): Periods {
  const timeZone = calendar?.timeZone ?? UTC;
  const anchorDay = calendar?.anchorDay ?? 1;
  let byAnchor = memos.get(timeZone);
  if (!byAnchor) memos.set(timeZone, (byAnchor = []));
  const memo = byAnchor[anchorDay];
  if (memo && nowMs >= memo.fromMs && nowMs < memo.untilMs) return memo.periods;
  const periods = compute(nowMs, timeZone, anchorDay);
  byAnchor[anchorDay] = { fromMs: periods.day[1], untilMs: periods.day[2], periods };
  return periods;
}

function compute(nowMs: number, timeZone: string, anchorDay: number): Periods {
  const zone = zoneOf(timeZone);
  const today = zone.dateAt(nowMs);
  const day = [-1, 0, 1, 2].map((offset) => zone.startOf(addDays(today, offset))) as unknown as Edges;
  // The month period begins on its anchor day: this month's, or the previous month's before it.
  const thisMonth = anchorIn(today.year, today.month, anchorDay);
  const first = today.day >= thisMonth.day ? addMonths(thisMonth, -1) : addMonths(thisMonth, -2);
  const month = [0, 1, 2, 3].map((offset) => {
    const { year, month: m } = addMonths(first, offset);
    return zone.startOf(anchorIn(year, m, anchorDay));
  }) as unknown as Edges;
  return { day, month };
}

export interface LocalDate {
  year: number;
  /** 1..12 */
  month: number;
  day: number;
}

function daysIn(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

function anchorIn(year: number, month: number, anchorDay: number): LocalDate {
  return { year, month, day: Math.min(anchorDay, daysIn(year, month)) };
}

function addDays(date: LocalDate, days: number): LocalDate {
  const d = new Date(Date.UTC(date.year, date.month - 1, date.day + days));
  return { year: d.getUTCFullYear(), month: d.getUTCMonth() + 1, day: d.getUTCDate() };
}

/** The same day of another month (the day is only a marker here: callers re-anchor it). */
function addMonths(date: LocalDate, months: number): LocalDate {
  const index = date.year * 12 + (date.month - 1) + months;
  return { year: Math.floor(index / 12), month: (index % 12) + 1, day: 1 };
}

function ordinal(date: LocalDate): number {
  return date.year * 10_000 + date.month * 100 + date.day;
}

interface Zone {
  dateAt(ms: number): LocalDate;
  /** The first instant whose local date is `date` or later. */
  startOf(date: LocalDate): number;
}

const zones = new Map<string, Zone>();

function zoneOf(timeZone: string): Zone {
  let zone = zones.get(timeZone);
  if (!zone) zones.set(timeZone, (zone = timeZone === UTC ? utcZone : intlZone(timeZone)));
  return zone;
}

const utcZone: Zone = {
  dateAt: (ms) => addDays({ year: 1970, month: 1, day: 1 }, Math.floor(ms / DAY_MS)),
  startOf: (date) => Date.UTC(date.year, date.month - 1, date.day),
};

/** Offsets are within −12 h..+14 h of UTC: a local midnight is within this of the same UTC date's. */
const SEARCH_MS = 15 * 3_600_000;

function intlZone(timeZone: string): Zone {
  const format = new Intl.DateTimeFormat('en-US', { timeZone, year: 'numeric', month: 'numeric', day: 'numeric' });
  const dateAt = (ms: number): LocalDate => {
    const parts: Record<string, number> = {};
    for (const part of format.formatToParts(ms)) parts[part.type] = Number(part.value);
    return { year: parts.year!, month: parts.month!, day: parts.day! };
  };
  return {
    dateAt,
    // Found by bisection, so a day that begins at 01:00 (daylight saving starting at midnight)
    // begins when its first instant does; runs once per zone, anchor and day (periodsAt).
    startOf: (date) => {
      const target = ordinal(date);
      let low = Date.UTC(date.year, date.month - 1, date.day) - SEARCH_MS;
      let high = low + 2 * SEARCH_MS;
      while (high - low > 1) {
        const mid = Math.floor((low + high) / 2);
        if (ordinal(dateAt(mid)) >= target) high = mid;
        else low = mid;
      }
      return high;
    },
  };
}

/** The first instant of a local date (`2026-11-01`) in `timeZone`. */
export function startOfDate(date: LocalDate, timeZone: string): number {
  return zoneOf(timeZone).startOf(date);
}
