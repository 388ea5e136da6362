import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { LoopLag } from '../../src/observability/loop-lag.js';
import { StoreHealth, timeoutNotOutage } from '../../src/store/store-health.js';

describe('store health breaker', () => {
  const logger = pino({ level: 'silent' });

  it('skips the store after a failure except for one probe per interval, and recovers on success', () => {
    let now = 1000;
    const health = new StoreHealth('redis', logger, 500, () => now);
    const changes: boolean[] = [];
    health.onChange((down) => changes.push(down));
    expect(health.shouldTry()).toBe(true);

    health.failed(new Error('timeout'));
    health.failed(new Error('timeout again'));
    expect(changes).toEqual([true]);
    expect(health.shouldTry()).toBe(false);
    now += 499;
    expect(health.shouldTry()).toBe(false);
    now += 1;
    expect(health.shouldTry()).toBe(true); // the probe
    expect(health.shouldTry()).toBe(false); // only one per interval

    health.succeeded();
    health.succeeded();
    expect(changes).toEqual([true, false]);
    expect(health.shouldTry()).toBe(true);
  });

  it('takes a timeout while other calls are answered for a slow Redis, not a dead one', () => {
    let now = 1000;
    const lag = new LoopLag(10_000); // never ticks within this test: no stall seen
    try {
      const health = new StoreHealth('redis', logger, 500, () => now, timeoutNotOutage(lag, 250));
      health.succeeded();
      now += 100;
      expect(health.failed(new Error('Command timed out'))).toBe(false);
      expect(health.isDown()).toBe(false);
      // Nothing answered for four timeouts: an outage.
      now += 900;
      expect(health.failed(new Error('Command timed out'))).toBe(true);
      expect(health.isDown()).toBe(true);
    } finally {
      lag.close();
    }
  });
});
