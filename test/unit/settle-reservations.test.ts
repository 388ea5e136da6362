import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ReservationSettler, type SettleOrder } from '../../src/gateway/reported-cost/settle-reservations.js';
import { createLogger } from '../../src/observability/log.js';
import { createMetrics } from '../../src/observability/metrics.js';
import type { QuotaStore, SettleResult } from '../../src/store/quota-store.js';

// The settler off the request path, on a scripted store (a pure unit: the real stores are tested
// in test/unit/quota-settle.test.ts and test/integration/quota-settle-differential.test.ts): a
// failed settlement goes again under the same id a bounded number of times, then is counted.

const order: SettleOrder = {
  subject: 'k1',
  keyId: 'k1',
  quota: { perMinute: 10, perDay: 100 },
  ban: { afterRejections: 5, window: 60, duration: 60 },
  settlement: { reserve: 10, cost: 3, minuteStartMs: 0, dayStartMs: 0, monthStartMs: 0 },
};

/** A store whose settle fails `failures` times, then succeeds; it records the ids it was asked with. */
function scriptedStore(failures: number) {
  const ids: string[] = [];
  const settle = (_s: string, _q: unknown, _b: unknown, settlement: { id: string }): Promise<SettleResult> => {
    ids.push(settlement.id);
    if (ids.length <= failures) return Promise.reject(new Error('Command timed out'));
    return Promise.resolve({ applied: true, shortfall: 0, creditBalance: 0 });
  };
  return { ids, store: { settle } as unknown as QuotaStore };
}

function settler(store: QuotaStore) {
  const metrics = createMetrics();
  const lines: string[] = [];
  const logger = createLogger('warn', 'tollgate-gateway', 'json', { write: (line: string) => void lines.push(line) });
  return { metrics, lines, settler: new ReservationSettler(store, metrics, logger) };
}

const failures = async (metrics: ReturnType<typeof createMetrics>) => (await metrics.costSettleFailures.get()).values[0]?.value ?? 0;

describe('settling reservations off the request path', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('tries a failed settlement again under the same id until it gets through', async () => {
    const { ids, store } = scriptedStore(2);
    const { metrics, settler: s } = settler(store);
    s.settle(order);
    const idle = s.idle();
    await vi.runAllTimersAsync();
    await idle;
    expect(ids).toHaveLength(3);
    expect(new Set(ids).size).toBe(1);
    expect(await failures(metrics)).toBe(0);
  });

  it('gives up after its last retry: the reservation stands, counted and logged', async () => {
    const { ids, store } = scriptedStore(100);
    const { metrics, lines, settler: s } = settler(store);
    s.settle(order);
    const idle = s.idle();
    await vi.runAllTimersAsync();
    await idle;
    expect(ids).toHaveLength(4);
    expect(await failures(metrics)).toBe(1);
    expect(lines.join('')).toContain('the reservation stands');
  });

  it('gives each settlement its own id, and sends none when the cost is the reservation', async () => {
    const { ids, store } = scriptedStore(0);
    const { settler: s } = settler(store);
    s.settle(order);
    s.settle(order);
    s.settle({ ...order, settlement: { ...order.settlement, cost: 10 } });
    await s.idle();
    expect(ids).toHaveLength(2);
    expect(ids[0]).not.toBe(ids[1]);
  });
});
