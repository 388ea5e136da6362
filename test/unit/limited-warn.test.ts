import { describe, expect, it, vi } from 'vitest';
import type { Logger } from '../../src/observability/log.js';
import { limitedWarn } from '../../src/observability/limited-warn.js';

describe('limitedWarn: lines clients can cause, bounded', () => {
  it('writes at most perMinute lines a minute, then says how many it left out', () => {
    vi.useFakeTimers({ now: 0 });
    try {
      const lines: Array<Record<string, unknown>> = [];
      const logger = { warn: (fields: Record<string, unknown>) => lines.push(fields) } as unknown as Logger;
      const warn = limitedWarn(logger, 'refused', 3);
      for (let i = 0; i < 1000; i++) warn({ i });
      expect(lines.map((l) => l.i)).toEqual([0, 1, 2]);
      vi.setSystemTime(60_000);
      warn({ i: 'next' });
      expect(lines.at(-1)).toEqual({ i: 'next', suppressed: 997 });
      warn({ i: 'after' });
      expect(lines.at(-1)).toEqual({ i: 'after' });
    } finally {
      vi.useRealTimers();
    }
  });
});
