import { describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { leaseRequest } from '../helpers/lease-requests.js';
import { RedisUsageReader } from '../../src/store/redis/redis-usage-reader.js';
import type { UsageDay } from '../../src/quota/usage-hours.js';
import { redisForFile } from '../helpers/redis-for-file.js';

// The usage rows of warm keys on a real redis-server and an injected clock: a decision's usage is
// one HINCRBY (requests admitted at one unit each, the 'n' field; quota-script.ts, usageAdd), an
// hour counted by gateways of the layout before that field and after it sums to what both counted
// (a rolling upgrade), and a usage hash lost while the windows' hash lives gets its 'p' and its
// expiry back with the next count.

const redis = redisForFile();
const ban: BanPolicy = { afterRejections: 1000, window: 60, duration: 60 };
const quota: Quota = { perMinute: 1000, perDay: 100_000 };
const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
const RETENTION_MS = 400 * DAY_MS;
const DAY_START_MS = Date.parse('2026-11-20T00:00:00Z');

/** Calls of each command since the last CONFIG RESETSTAT. */
async function commandCalls(): Promise<Record<string, number>> {
  const calls: Record<string, number> = {};
  for (const match of (await redis.client().info('commandstats')).matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)) {
    calls[match[1]!] = Number(match[2]);
  }
  return calls;
}

async function usageDays(subject: string): Promise<UsageDay[]> {
  const days: UsageDay[] = [];
  for await (const day of new RedisUsageReader(redis.client()).days(DAY_START_MS, DAY_START_MS + DAY_MS, subject)) days.push(day);
  return days;
}

describe('usage rows of warm keys', () => {
  it('counts a warm key’s decision with one HINCRBY, setting the day’s periods once', async () => {
    const clock = { nowMs: DAY_START_MS + 10 * HOUR_MS };
    const store = new RedisQuotaStore(redis.client(), () => clock.nowMs, RETENTION_MS);
    const keys = Array.from({ length: 8 }, (_, i) => `warm${i}`);
    // One turn: the eight keys share one MULTI_QUOTA_SCRIPT call; their first counts of the hour.
    await Promise.all(keys.map((key) => store.consume(key, quota, ban)));
    clock.nowMs += 1_000;
    await redis.client().config('RESETSTAT');
    await Promise.all(keys.map((key) => store.consume(key, quota, ban)));
    const calls = await commandCalls();
    expect(calls.evalsha).toBe(1);
    expect(calls.hincrby).toBe(keys.length);
    expect(calls.hsetnx).toBeUndefined();
    expect(calls.pexpire).toBeUndefined();
    for (const key of keys) {
      expect((await usageDays(key)).map((day) => day.hours)).toEqual([
        [{ hourStartMs: DAY_START_MS + 10 * HOUR_MS, admitted: 2, refused: 0, units: 2, credits: 0 }],
      ]);
    }
  });

  it('sums an hour counted by a gateway writing admitted and units apiece and one writing the one-unit field (a rolling upgrade)', async () => {
    const hourStartMs = DAY_START_MS + 3 * HOUR_MS;
    const clock = { nowMs: hourStartMs + 5 * 60_000 };
    const store = new RedisQuotaStore(redis.client(), () => clock.nowMs, RETENTION_MS);
    // An older gateway's step, as its usageAdd wrote it: 'p' if missing, then the hour's ':a' and ':u'.
    const key = `tg:usage:{mixed}:${DAY_START_MS}`;
    const older = async (admitted: number, units: number) => {
      await redis.client().hsetnx(key, 'p', `${DAY_START_MS + DAY_MS} 0 0`);
      await redis.client().hincrby(key, `${hourStartMs}:a`, admitted);
      await redis.client().hincrby(key, `${hourStartMs}:u`, units);
    };
    await older(2, 2);
    await store.consume('mixed', quota, ban, 1);
    await store.consume('mixed', quota, ban, 3);
    await older(1, 4);
    clock.nowMs += 60_000;
    await store.consume('mixed', quota, ban, 1);
    const [day] = await usageDays('mixed');
    expect(day?.hours).toEqual([{ hourStartMs, admitted: 6, refused: 0, units: 11, credits: 0 }]);
    // The windows counted the new gateway's units: 5 of the 11.
    expect((await store.usage('mixed', quota)).dayCount).toBe(5);
  });

  it('gives a usage hash lost while the windows’ hash lives its periods and expiry again with the next count', async () => {
    const clock = { nowMs: DAY_START_MS + 7 * HOUR_MS };
    const store = new RedisQuotaStore(redis.client(), () => clock.nowMs, RETENTION_MS);
    await store.consume('lost', quota, ban);
    const key = `tg:usage:{lost}:${DAY_START_MS}`;
    const periods = await redis.client().hget(key, 'p');
    expect(periods).toMatch(/^\d+ \d+ \d+$/);
    // Deleted (or evicted) within the hour: the quota hash still says nothing of it.
    await redis.client().del(key);
    expect(await redis.client().exists('tg:quota:{lost}')).toBe(1);
    clock.nowMs += 1_000;
    await store.consume('lost', quota, ban);
    expect(await redis.client().hget(key, 'p')).toBe(periods);
    expect(await redis.client().pttl(key)).toBeGreaterThan(RETENTION_MS);
    const [day] = await usageDays('lost');
    expect(day?.hours).toEqual([{ hourStartMs: DAY_START_MS + 7 * HOUR_MS, admitted: 1, refused: 0, units: 1, credits: 0 }]);
  });

  // A rolling upgrade with reported costs and leases (TOLLGATE_OLD: a checkout of the version before
  // the 'n' field, with node_modules; skipped without). A request reserved at one unit and settled
  // to 0 leaves its hour ':n' 1 and ':u' -1 (its unit given back off ':u'); an old replica's
  // LEASE_SCRIPT caps a give-back by ':u' alone (the units it thinks the hour holds), so it takes
  // one unit too few off the hour: the export says 1 unit where the hour charged none. Expected to
  // fail while the older version is this repository’s 4194b83 (docs/operations.md, "Upgrading from a version without the `n` field").
  it.skipIf(!process.env.TOLLGATE_OLD).fails(
    'an older replica’s lease give-back after a settlement to 0 in the hour leaves the hour’s units exact',
    async () => {
      type Older = new (client: unknown, clock: () => number, usageRetentionMs: number) => RedisQuotaStore;
      const path = `${process.env.TOLLGATE_OLD}/src/store/redis/redis-quota-store.ts`;
      const { RedisQuotaStore: OlderStore } = (await import(path)) as { RedisQuotaStore: Older };
      const hourStartMs = DAY_START_MS + 15 * HOUR_MS;
      const clock = { nowMs: hourStartMs + 5_000 };
      const store = new RedisQuotaStore(redis.client(), () => clock.nowMs, RETENTION_MS);
      const client = redis.server().client();
      try {
        const older = new OlderStore(client, () => clock.nowMs, RETENTION_MS);
        const admitted = await store.consume('settled', quota, ban, 1);
        expect(admitted.verdict).toBe('allowed');
        const settled = await store.settle('settled', quota, ban, {
          id: 'settled-1',
          reserve: 1,
          cost: 0,
          minuteStartMs: hourStartMs,
          dayStartMs: DAY_START_MS,
          monthStartMs: 0,
        });
        expect(settled.applied).toBe(true);
        const lease = leaseRequest({ want: 5, holder: 'old-replica' });
        const grant = await older.reserve('settled', quota, ban, lease);
        expect(grant.granted).toBe(5);
        // The whole block back unused, in the grant's minute.
        await older.reserve('settled', quota, ban, {
          ...lease,
          want: 0,
          giveBack: 5,
          giveBackMinuteStartMs: grant.minuteStartMs,
          giveBackDayStartMs: grant.dayStartMs,
          giveBackNo: 1,
        });
        const [day] = await usageDays('settled');
        expect(day?.hours).toEqual([{ hourStartMs, admitted: 1, refused: 0, units: 0, credits: 0 }]);
      } finally {
        client.disconnect();
      }
    },
  );
});
