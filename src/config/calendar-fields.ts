// The calendar fields of the config and of key records: a time zone (gateway.yaml
// `quota.timeZone`) and a billing anchor (a key's `--billing-anchor`). Their periods are
// src/quota/calendar.ts's; here only what validation needs.

/** The zone and anchor a quota's day and month follow. */
export interface Calendar {
  /** An IANA zone name ('UTC', 'Europe/Berlin'). */
  timeZone: string;
  /** The day of the month a month period begins on (1..31; a shorter month: its last day); absent: the 1st. */
  anchorDay?: number;
}

/** Whether `timeZone` is an IANA zone name this runtime knows. */
export function isTimeZone(timeZone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone });
    return true;
  } catch {
    return false;
  }
}

const BILLING_ANCHOR = /^(\d{4})-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$/;

/** A billing anchor is a date (`2026-01-31`): its day of the month, or undefined when it is not a real date. */
export function anchorDayOf(anchor: string): number | undefined {
  const match = BILLING_ANCHOR.exec(anchor);
  if (!match) return undefined;
  const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])];
  return day <= new Date(Date.UTC(year, month, 0)).getUTCDate() ? day : undefined;
}
