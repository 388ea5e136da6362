import type { UsageDay } from '../quota/usage-hours.js';
import { DAY_MS } from '../quota/windows.js';
import { DEFAULT_USAGE_RETENTION_DAYS } from '../config/gateway-schema.js';

export const DEFAULT_USAGE_RETENTION_MS = DEFAULT_USAGE_RETENTION_DAYS * DAY_MS;

/** The longest day of any calendar (a day losing an hour to daylight saving is shorter). */
const LONGEST_DAY_MS = 26 * 3_600_000;

/**
 * Usage for invoicing as the stores keep it: per subject and day of its calendar, its hours
 * (written by the quota step itself: Redis's scripts, quota-script.ts; the embedded store,
 * memory-usage.ts). Read in batches, so an export of many subjects holds one batch at a time.
 */
export interface UsageReader {
  /**
   * The stored days that may hold hours in [fromMs, toMs), of `subject` or of every subject, in no
   * particular order (the caller keeps to the range hour by hour).
   */
  days(fromMs: number, toMs: number, subject?: string): AsyncIterable<UsageDay>;
}

/** Whether a day beginning at `dayStartMs` may hold hours in [fromMs, toMs). */
export function dayMayOverlap(dayStartMs: number, fromMs: number, toMs: number): boolean {
  return dayStartMs < toMs && dayStartMs + LONGEST_DAY_MS > fromMs;
}
