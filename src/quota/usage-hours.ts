// Usage for invoicing is kept per subject and hour; hours count from the start of the subject's
// day (calendar.ts: the quota's zone), not from UTC, so that they sum exactly to the zone's days
// and months, in zones with half-hour offsets and across daylight-saving changes alike (a day of
// 23 or 25 hours has as many hours). The quota script computes the same (quota-script.ts, usageHour).

import type { Calendar } from '../config/calendar-fields.js';
import { periodsAt, pick } from './calendar.js';

export const HOUR_MS = 3_600_000;

/** The start of the hour of `atMs` in the day that began at `dayStartMs`. */
export function usageHourStartMs(dayStartMs: number, atMs: number): number {
  return dayStartMs + Math.floor((atMs - dayStartMs) / HOUR_MS) * HOUR_MS;
}

/** What one hour of one subject counted. */
export interface UsageCounts {
  /** Requests admitted. */
  admitted: number;
  /** Requests refused by the quota step (a window, a ban, a balance that could not pay). */
  refused: number;
  /** Units charged to the windows. */
  units: number;
  /** Prepaid credits spent. */
  credits: number;
}

export const NO_USAGE: UsageCounts = Object.freeze({ admitted: 0, refused: 0, units: 0, credits: 0 });

export function addUsage(into: UsageCounts, more: UsageCounts): void {
  into.admitted += more.admitted;
  into.refused += more.refused;
  into.units += more.units;
  into.credits += more.credits;
}

/** The day (of a quota's calendar) usage is kept in, and the month window that day is in. */
export interface UsagePeriods {
  dayStartMs: number;
  dayEndMs: number;
  monthStartMs: number;
  monthEndMs: number;
}

/** One subject's usage in one hour. */
export interface UsageHour extends UsageCounts {
  hourStartMs: number;
}

/** One hour with the day and month it belongs to (what the degraded ledger hands to reconcile). */
export interface HourUsage extends UsagePeriods, UsageHour {}

/** One subject's usage in one day of its calendar, as stored: its hours in order. */
export interface UsageDay extends UsagePeriods {
  /** A key id, `owner:<name>`, a JWT consumer's `jwt:…`, or an anonymous `anon:…` (quota-subject.ts). */
  subject: string;
  hours: UsageHour[];
}

/** The day and month of `calendar` that `nowMs` falls in. */
export function usagePeriodsAt(nowMs: number, calendar?: Calendar): UsagePeriods {
  const periods = periodsAt(nowMs, calendar);
  const [dayStartMs, dayEndMs] = pick(periods.day, nowMs);
  const [monthStartMs, monthEndMs] = pick(periods.month, nowMs);
  return { dayStartMs, dayEndMs, monthStartMs, monthEndMs };
}
