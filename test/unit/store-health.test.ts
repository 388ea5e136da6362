import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { StoreHealth } from '../../src/store/store-health.js';

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
});
