import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { DegradedLedger } from '../../src/gateway/degraded-ledger.js';
import { periodsAt, pick } from '../../src/quota/calendar.js';
import { DAY_MS, MINUTE_MS, windowStartMs } from '../../src/quota/windows.js';
import type { DegradedAdmissions } from '../../src/store/quota-store.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { TestRedis } from '../helpers/redis-server.js';
import { redisForFile } from '../helpers/redis-for-file.js';

// What a replica admitted while Redis was away is added to Redis once it is back: to the windows
// that have not rolled, once per (replica, batch) whatever the retries, bans included.

const redis = redisForFile();
const quota: Quota = { perMinute: 100, perDay: 1000 };
const ban: BanPolicy = { afterRejections: 5, window: 60, duration: 600 };
const T0 = Date.UTC(2026, 0, 5, 10, 30, 10);
const logger = pino({ level: 'silent' });

function batch(seq: number, units: number, nowMs = T0, bannedUntilMs = 0): DegradedAdmissions {
  return {
    seq,
    minuteStartMs: windowStartMs(nowMs, MINUTE_MS),
    minuteUnits: units,
    dayStartMs: windowStartMs(nowMs, DAY_MS),
    dayUnits: units,
    monthStartMs: Date.UTC(new Date(nowMs).getUTCFullYear(), new Date(nowMs).getUTCMonth(), 1),
    monthUnits: units,
    bannedUntilMs,
  };
}

describe('reconciling degraded admissions', () => {
  it('adds a batch to the current windows once, however often it is sent', async () => {
    const clock = { nowMs: T0 };
    const store = new RedisQuotaStore(redis.client(), () => clock.nowMs);
    await store.consume('once', quota, ban, 3);
    await store.reconcile('once', 'replica-a', batch(1, 7));
    await store.reconcile('once', 'replica-a', batch(1, 7)); // a retry after a cut flush
    await store.reconcile('once', 'replica-b', batch(1, 2)); // another replica's own sequence
    expect(await store.usage('once')).toMatchObject({ minuteCount: 12, dayCount: 12 });
  });

  it('adds only to the windows that have not rolled', async () => {
    const clock = { nowMs: T0 + MINUTE_MS };
    const store = new RedisQuotaStore(redis.client(), () => clock.nowMs);
    await store.reconcile('rolled', 'replica-a', batch(1, 9, T0));
    expect(await store.usage('rolled')).toMatchObject({ minuteCount: 0, dayCount: 9 });
    clock.nowMs = T0 + DAY_MS;
    await store.reconcile('rolled', 'replica-a', batch(2, 4, T0));
    expect(await store.usage('rolled')).toMatchObject({ minuteCount: 0, dayCount: 0 });
  });

  it("adds to the month and to a day of the quota's zone, never resetting the counts Redis holds there", async () => {
    // 23:30 in Berlin on the 31st of January: the Berlin day began an hour before the UTC one ended.
    const nowMs = Date.UTC(2026, 0, 31, 22, 30, 0);
    const calendar = { timeZone: 'Europe/Berlin' };
    const monthly: Quota = { perMinute: 100, perDay: 1000, perMonth: 5000, calendar };
    const clock = { nowMs };
    const store = new RedisQuotaStore(redis.client(), () => clock.nowMs);
    await store.consume('zoned', monthly, ban, 6);
    const ledger = new DegradedLedger(store, logger);
    for (let i = 0; i < 4; i++) ledger.record('zoned', { verdict: 'allowed', nowMs, cost: 1, bannedUntilMs: 0 }, monthly);
    expect(await ledger.flush()).toBe(true);
    expect(await store.usage('zoned', monthly)).toMatchObject({ minuteCount: 10, dayCount: 10, monthCount: 10 });
    // The Berlin month has ended at 23:00 UTC: a late batch of January adds to no window of February.
    clock.nowMs = nowMs + 45 * MINUTE_MS;
    const periods = periodsAt(clock.nowMs, calendar);
    expect(pick(periods.month, clock.nowMs)[0]).toBe(Date.UTC(2026, 0, 31, 23, 0, 0));
    ledger.record('zoned', { verdict: 'allowed', nowMs, cost: 3, bannedUntilMs: 0 }, monthly);
    expect(await ledger.flush()).toBe(true);
    expect(await store.usage('zoned', monthly)).toMatchObject({ dayCount: 0, monthCount: 0 });
    ledger.close();
  });

  it('applies a ban earned while Redis was away', async () => {
    const clock = { nowMs: T0 };
    const store = new RedisQuotaStore(redis.client(), () => clock.nowMs);
    await store.reconcile('banned', 'replica-a', batch(1, 0, T0, T0 + 60_000));
    expect(await store.usage('banned')).toMatchObject({ verdict: 'banned', bannedUntilMs: T0 + 60_000 });
    expect((await store.consume('banned', quota, ban)).verdict).toBe('banned');
    clock.nowMs = T0 + 60_000;
    expect((await store.consume('banned', quota, ban)).verdict).toBe('allowed');
  });

  it('keeps a batch whose flush failed, with its sequence, and never applies it twice', async () => {
    const server = await TestRedis.start();
    const client = server.client();
    client.on('error', () => {}); // refused while the server is down: the flush's own failure says so
    try {
      const store = new RedisQuotaStore(client);
      const ledger = new DegradedLedger(store, logger);
      const nowMs = Date.now();
      for (let i = 0; i < 5; i++) ledger.record('cut', { verdict: 'allowed', nowMs, cost: 1, bannedUntilMs: 0 });
      await server.kill();
      expect(await ledger.flush()).toBe(false);
      // Admitted during the second outage: a batch of its own.
      ledger.record('cut', { verdict: 'allowed', nowMs, cost: 2, bannedUntilMs: 0 });
      await server.launch();
      await expect.poll(() => client.ping().catch(() => 'down'), { timeout: 10_000 }).toBe('PONG');
      expect(await ledger.flush()).toBe(true);
      expect(ledger.empty).toBe(true);
      // The same batches sent again (a flush whose answer was lost) change nothing.
      expect((await store.usage('cut')).dayCount).toBe(7);
      await store.reconcile('cut', ledger.replicaId, batch(1, 5, nowMs));
      expect((await store.usage('cut')).dayCount).toBe(7);
      ledger.close();
    } finally {
      client.disconnect();
      await server.stop();
    }
  });
});
