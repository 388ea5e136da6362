import { startOfDate } from './calendar.js';
import { addUsage, HOUR_MS, type UsageCounts, type UsageDay } from './usage-hours.js';

/**
 * Usage for invoicing, exported (`tollgate usage export`, GET /admin/v1/usage): the stored days
 * (usage-store.ts) turned into rows per consumer and hour, day or month, as they are read. Hour and
 * day rows leave as soon as their day is read, in no particular order; month rows are summed per
 * consumer and month window first (memory: one sum per consumer and month, never the hours), and
 * leave at the end. Only hours in [from, to) count; a row names its whole period.
 */
export type UsageGrouping = 'hour' | 'day' | 'month';
export type UsageFormat = 'csv' | 'jsonl';

export interface UsageQuery {
  fromMs: number;
  toMs: number;
  by: UsageGrouping;
  format: UsageFormat;
  /** One consumer's rows only (a key id, `owner:<name>`, `jwt:…`, `anon:…`). */
  consumer?: string;
}

export interface UsageRow extends UsageCounts {
  consumer: string;
  /** The period's first instant and its end (ISO 8601, UTC): the hour, the day or the month window. */
  from: string;
  to: string;
}

/** The columns, in order (CSV's header, JSONL's keys). */
export const USAGE_COLUMNS = ['consumer', 'from', 'to', 'admitted', 'refused', 'units', 'credits'] as const;

/** A query refused: the message names the parameter. */
export class UsageQueryError extends Error {}

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
/** An instant with its offset: 2026-11-01T00:00:00Z, 2026-11-01T00:00:00+01:00. */
const INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})$/;
/** Longest range one export may cover. */
const MAX_RANGE_DAYS = 3660;

/**
 * The parameters as the CLI and the admin API take them: `from` and `to` are dates (their first
 * instant in `timeZone`, gateway.yaml quota.timeZone) or instants with an offset; `by` hour, day or
 * month (default day); `format` csv or jsonl (default csv).
 */
export function parseUsageQuery(
  raw: { from?: string; to?: string; by?: string; format?: string; consumer?: string },
  timeZone: string,
): UsageQuery {
  const fromMs = instantOf(raw.from, 'from', timeZone);
  const toMs = instantOf(raw.to, 'to', timeZone);
  if (toMs <= fromMs) throw new UsageQueryError('to must be later than from');
  if (toMs - fromMs > MAX_RANGE_DAYS * 24 * HOUR_MS) throw new UsageQueryError(`from and to may be at most ${MAX_RANGE_DAYS} days apart`);
  const by = raw.by ?? 'day';
  if (by !== 'hour' && by !== 'day' && by !== 'month') throw new UsageQueryError('by must be hour, day or month');
  const format = raw.format ?? 'csv';
  if (format !== 'csv' && format !== 'jsonl') throw new UsageQueryError('format must be csv or jsonl');
  if (raw.consumer !== undefined && (raw.consumer.length === 0 || raw.consumer.length > 512))
    throw new UsageQueryError('consumer must be a consumer id (1 to 512 characters)');
  return { fromMs, toMs, by, format, ...(raw.consumer !== undefined && { consumer: raw.consumer }) };
}

function instantOf(value: string | undefined, name: string, timeZone: string): number {
  if (value === undefined) throw new UsageQueryError(`${name} is required (a date such as 2026-11-01, or an instant with its offset)`);
  const date = DATE.exec(value);
  if (date) {
    const [year, month, day] = [Number(date[1]), Number(date[2]), Number(date[3])];
    const check = new Date(Date.UTC(year, month - 1, day));
    if (check.getUTCFullYear() === year && check.getUTCMonth() === month - 1 && check.getUTCDate() === day)
      return startOfDate({ year, month, day }, timeZone);
  } else if (INSTANT.test(value) && Number.isFinite(Date.parse(value))) {
    return Date.parse(value);
  }
  throw new UsageQueryError(`${name} must be a date such as 2026-11-01, or an instant with its offset such as 2026-11-01T00:00:00Z`);
}

/** Rows of `days` for `query`; `include` decides per consumer (an owner-scoped caller sees its owner's). */
export async function* usageRows(
  days: AsyncIterable<UsageDay>,
  query: UsageQuery,
  include: (consumer: string) => boolean | Promise<boolean> = () => true,
): AsyncIterable<UsageRow> {
  const months = new Map<string, UsageRow>();
  const decided = new Map<string, boolean>();
  for await (const day of days) {
    if (query.consumer !== undefined && day.subject !== query.consumer) continue;
    let included = decided.get(day.subject);
    if (included === undefined) decided.set(day.subject, (included = await include(day.subject)));
    if (!included) continue;
    const hours = day.hours.filter((h) => h.hourStartMs >= query.fromMs && h.hourStartMs < query.toMs);
    if (hours.length === 0) continue;
    if (query.by === 'hour') {
      for (const h of hours) yield row(day.subject, h.hourStartMs, Math.min(h.hourStartMs + HOUR_MS, day.dayEndMs), h);
      continue;
    }
    const sum = row(day.subject, day.dayStartMs, day.dayEndMs);
    for (const h of hours) addUsage(sum, h);
    if (query.by === 'day') {
      yield sum;
      continue;
    }
    const key = `${day.subject}\n${day.monthStartMs}`;
    const month = months.get(key);
    if (month) addUsage(month, sum);
    else months.set(key, { ...sum, from: iso(day.monthStartMs), to: iso(day.monthEndMs) });
  }
  yield* months.values();
}

function row(consumer: string, fromMs: number, toMs: number, counts?: UsageCounts): UsageRow {
  const { admitted = 0, refused = 0, units = 0, credits = 0 } = counts ?? {};
  return { consumer, from: iso(fromMs), to: iso(toMs), admitted, refused, units, credits };
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** The rows as text, a line each: CSV (RFC 4180, with a header line) or JSON Lines. */
export async function* formatUsage(rows: AsyncIterable<UsageRow>, format: UsageFormat): AsyncIterable<string> {
  if (format === 'csv') yield `${USAGE_COLUMNS.join(',')}\r\n`;
  for await (const r of rows) {
    yield format === 'csv' ? `${USAGE_COLUMNS.map((c) => csvField(String(r[c]))).join(',')}\r\n` : `${JSON.stringify(r)}\n`;
  }
}

function csvField(value: string): string {
  return /[",\r\n]/.test(value) ? `"${value.replace(/"/g, '""')}"` : value;
}

export const USAGE_CONTENT_TYPES: Record<UsageFormat, string> = {
  csv: 'text/csv; charset=utf-8',
  jsonl: 'application/jsonl; charset=utf-8',
};
