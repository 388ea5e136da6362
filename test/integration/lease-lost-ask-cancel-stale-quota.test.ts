import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Quota } from '../../src/config/plans-schema.js';
import { FaultProxy } from '../helpers/fault-proxy.js';
import { leaseReplicas, NO_BANS } from '../helpers/lease-replicas.js';
import { TestRedis } from '../helpers/redis-server.js';

// Review of 0e9d74a (a lost lease ask named alone a second later, `cancelLost`). That step went
// with the quota of the ask that was lost. A key changed meanwhile (keys.onChange: its billing
// anchor moved, so its month begins on another day) is counted under its new quota by then; a
// step under the old one reads the stored month as ended (another start) and, as it gives the
// lost block's minute back, writes the state with that month's count at 0: the month counted
// under the new quota was forgotten, and would be admitted again (measured: 40 → 0). Before that
// change only the key's next ask named a lost one, under the key's quota then. A replica of the
// quota step in the test's process through a fault proxy, one real redis-server, one clock.

const BEFORE: Quota = { perMinute: 100_000, perDay: 1_000_000, perMonth: 10_000_000, calendar: { timeZone: 'UTC' } };
const AFTER: Quota = { ...BEFORE, calendar: { timeZone: 'UTC', anchorDay: 15 } };

let redis: TestRedis;
let proxy: FaultProxy;
const clock = { nowMs: 0 };
const replicas = leaseReplicas(clock);

beforeAll(async () => {
  redis = await TestRedis.start();
  proxy = await FaultProxy.start(redis.port);
});

afterEach(async () => {
  proxy.latency(0);
  await replicas.closeAll();
});

afterAll(async () => {
  await proxy?.stop();
  await redis?.stop();
});

describe('a lost ask of a key that changed before it was named alone', { timeout: 60_000 }, () => {
  it("leaves the month counted under the key's new quota as it is", async () => {
    clock.nowMs = Date.UTC(2031, 2, 4, 10, 0, 5);
    const subject = 'stale-quota-cancel';
    const r = await replicas.open(proxy.url);
    // Its first ask: Redis runs it, the answer comes too late.
    proxy.latency(400);
    let lost = false;
    for (let i = 0; i < 100 && !lost; i++) {
      clock.nowMs += 10;
      const waiting = r.leases.admit(subject, BEFORE, NO_BANS, 1);
      if (waiting instanceof Promise)
        lost = await waiting.then(
          () => false,
          () => true,
        );
    }
    expect(lost).toBe(true);
    proxy.latency(0);
    // The key's billing anchor moves (keys.onChange); its requests are counted under the new quota
    // (by Redis: another replica's, or this one's not yet hot again).
    r.leases.forget(subject);
    for (let i = 0; i < 40; i++) expect((await r.store.consume(subject, AFTER, NO_BANS, 1)).verdict).toBe('allowed');
    const month = (await r.store.usage(subject, AFTER)).monthCount;
    expect(month).toBeGreaterThanOrEqual(40);
    // Well past the time the lost ask is named alone.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect((await r.store.usage(subject, AFTER)).monthCount).toBe(month);
  });
});
