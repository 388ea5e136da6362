import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { LoopLag } from '../../src/observability/loop-lag.js';
import { StoreHealth, timeoutNotOutage } from '../../src/store/store-health.js';

// A busy gateway is not a dead Redis: a command timeout while the process's own event loop
// stalled does not trip the breaker (the reply may have been sitting in the socket).

function block(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // a stalled loop, as a busy or SIGSTOPped process has
  }
}

const tick = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const timeout = () => new Error('Command timed out');

describe('event loop lag', () => {
  it('sees a stall while it is under way and for a while after it', async () => {
    const lag = new LoopLag(10);
    try {
      await tick(30);
      block(200);
      // Under way: the tick is overdue now.
      expect(lag.worstWithinMs(1000)).toBeGreaterThanOrEqual(150);
      await tick(30);
      expect(lag.stalledWithin(1000, 150)).toBe(true);
    } finally {
      lag.close();
    }
  });

  it('keeps the breaker closed on a timeout behind a stall, and opens it on one without', async () => {
    const lag = new LoopLag(10);
    const logger = pino({ level: 'silent' });
    try {
      const health = new StoreHealth('redis', logger, 500, Date.now, timeoutNotOutage(lag, 100));
      block(200);
      expect(health.failed(timeout())).toBe(false);
      expect(health.isDown()).toBe(false);
      // A connection error is Redis's, stall or not.
      const other = new StoreHealth('redis', logger, 500, Date.now, timeoutNotOutage(lag, 100));
      expect(other.failed(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }))).toBe(true);
      // Long after the stall, a timeout is Redis's too. (The loop ticks freely meanwhile: the
      // window looked back on is 4 × 100 ms.)
      const fresh = new LoopLag(10);
      try {
        await tick(450);
        const later = new StoreHealth('redis', logger, 500, Date.now, timeoutNotOutage(fresh, 100));
        if (fresh.worstWithinMs(400) < 50) expect(later.failed(timeout())).toBe(true);
      } finally {
        fresh.close();
      }
    } finally {
      lag.close();
    }
  });
});
