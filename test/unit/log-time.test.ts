import { describe, expect, it } from 'vitest';
import { isoTimeAt } from '../../src/observability/log.js';

// The access line's time field is formatted in parts (the second once, then its milliseconds):
// it must stay byte for byte pino's `,"time":"<toISOString>"` at any millisecond.
describe('the log time field', () => {
  const expected = (ms: number) => `,"time":"${new Date(ms).toISOString()}"`;

  it('is toISOString at every millisecond, across seconds, minutes, days and years', () => {
    const starts = [Date.UTC(2026, 10, 26, 0, 40, 0), Date.UTC(2026, 11, 31, 23, 59, 59), Date.UTC(2028, 1, 28, 23, 59, 58)];
    for (const start of starts) {
      for (let ms = start; ms < start + 2500; ms++) expect(isoTimeAt(ms)).toBe(expected(ms));
    }
  });

  it('follows a clock that steps back, and repeats within one millisecond', () => {
    const times = [1_764_117_600_999, 1_764_117_601_000, 1_764_117_600_005, 1_764_117_600_005, 1_764_117_599_050, 1_764_117_601_100];
    for (const ms of times) expect(isoTimeAt(ms)).toBe(expected(ms));
  });
});
