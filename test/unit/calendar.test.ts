import { describe, expect, it } from 'vitest';
import { anchorDayOf, isTimeZone } from '../../src/config/calendar-fields.js';
import { periodsAt, pick } from '../../src/quota/calendar.js';

// Day and month periods in a time zone and from a billing anchor, on an injected clock.

const HOUR_MS = 3_600_000;
const berlin = { timeZone: 'Europe/Berlin' };

describe('calendar periods', () => {
  it('keeps UTC days and calendar months by default', () => {
    const now = Date.UTC(2026, 10, 22, 10, 0, 10);
    const { day, month } = periodsAt(now);
    expect(day).toEqual([Date.UTC(2026, 10, 21), Date.UTC(2026, 10, 22), Date.UTC(2026, 10, 23), Date.UTC(2026, 10, 24)]);
    expect(month).toEqual([Date.UTC(2026, 9, 1), Date.UTC(2026, 10, 1), Date.UTC(2026, 11, 1), Date.UTC(2027, 0, 1)]);
  });

  it('begins Berlin days at local midnight, 23 and 25 hours long on the daylight-saving changes', () => {
    // 2026-03-29: clocks go from 02:00 CET to 03:00 CEST.
    const spring = periodsAt(Date.UTC(2026, 2, 29, 12), berlin).day;
    expect(spring[1]).toBe(Date.UTC(2026, 2, 28, 23));
    expect(spring[2] - spring[1]).toBe(23 * HOUR_MS);
    expect(spring[2]).toBe(Date.UTC(2026, 2, 29, 22));
    // 2026-10-25: clocks go from 03:00 CEST back to 02:00 CET.
    const autumn = periodsAt(Date.UTC(2026, 9, 25, 12), berlin).day;
    expect(autumn[1]).toBe(Date.UTC(2026, 9, 24, 22));
    expect(autumn[2] - autumn[1]).toBe(25 * HOUR_MS);
  });

  it('begins Berlin months at local midnight of the 1st, whichever offset is in force', () => {
    const { month } = periodsAt(Date.UTC(2026, 2, 15), berlin);
    expect(month).toEqual([Date.UTC(2026, 0, 31, 23), Date.UTC(2026, 1, 28, 23), Date.UTC(2026, 2, 31, 22), Date.UTC(2026, 3, 30, 22)]);
    // One millisecond before March begins in Berlin it is still February there.
    const lastOfFebruary = periodsAt(Date.UTC(2026, 1, 28, 22, 59, 59, 999), berlin).month;
    expect(pick(lastOfFebruary, Date.UTC(2026, 1, 28, 22, 59, 59, 999))).toEqual([Date.UTC(2026, 0, 31, 23), Date.UTC(2026, 1, 28, 23)]);
  });

  it('resets an anchor of the 31st on the 31st, or on the last day of a shorter month', () => {
    const calendar = { timeZone: 'UTC', anchorDay: 31 };
    const { month } = periodsAt(Date.UTC(2026, 1, 10), calendar);
    expect(month).toEqual([Date.UTC(2025, 11, 31), Date.UTC(2026, 0, 31), Date.UTC(2026, 1, 28), Date.UTC(2026, 2, 31)]);
    const leap = periodsAt(Date.UTC(2028, 1, 29, 5), calendar).month;
    expect(pick(leap, Date.UTC(2028, 1, 29, 5))).toEqual([Date.UTC(2028, 1, 29), Date.UTC(2028, 2, 31)]);
    const april = periodsAt(Date.UTC(2026, 3, 30, 1), calendar).month;
    expect(pick(april, Date.UTC(2026, 3, 30, 1))).toEqual([Date.UTC(2026, 3, 30), Date.UTC(2026, 4, 31)]);
  });

  it('picks the period of the edges a clock falls in, so a skewed caller still names the same one', () => {
    const edges = periodsAt(Date.UTC(2026, 10, 22, 23, 59, 59, 999)).day;
    expect(pick(edges, Date.UTC(2026, 10, 23))).toEqual([Date.UTC(2026, 10, 23), Date.UTC(2026, 10, 24)]);
    const ahead = periodsAt(Date.UTC(2026, 10, 23)).day;
    expect(pick(ahead, Date.UTC(2026, 10, 22, 23, 59, 59, 999))).toEqual([Date.UTC(2026, 10, 22), Date.UTC(2026, 10, 23)]);
  });

  it('begins a day at its first instant when midnight does not exist', () => {
    // America/Santiago, 2026-09-06: clocks go from 00:00 to 01:00.
    const { day } = periodsAt(Date.UTC(2026, 8, 6, 12), { timeZone: 'America/Santiago' });
    expect(day[1]).toBe(Date.UTC(2026, 8, 6, 4));
    expect(day[2] - day[1]).toBe(23 * HOUR_MS);
  });

  it('recognises zones and anchors', () => {
    expect(isTimeZone('Europe/Berlin')).toBe(true);
    expect(isTimeZone('Europe/Berlyn')).toBe(false);
    expect(anchorDayOf('2026-01-31')).toBe(31);
    expect(anchorDayOf('2026-02-31')).toBeUndefined();
    expect(anchorDayOf('31')).toBeUndefined();
  });
});
