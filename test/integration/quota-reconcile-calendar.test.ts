import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { DegradedMode } from '../../src/gateway/degraded-mode.js';
import type { QuotaNotice } from '../../src/store/quota-store.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { redisForFile } from '../helpers/redis-for-file.js';

// Degraded admissions reach Redis in the windows the quota counts in: a day in the configured time
// zone (whose start is never the UTC midnight for Asia/Tokyo), and the month; and the lease holders
// of the subject hear of them.

const redis = redisForFile();
const ban: BanPolicy = { afterRejections: 5, window: 60, duration: 600 };
const logger = pino({ level: 'silent' });
const tokyo: Quota = { perMinute: 100, perDay: 1000, perMonth: 5000, calendar: { timeZone: 'Asia/Tokyo' } };

describe('reconciling degraded admissions under a calendar', () => {
  it('adds them to the zone day and the month, keeping what Redis had counted', async () => {
    const store = new RedisQuotaStore(redis.client());
    const degraded = new DegradedMode('local', 1, store, logger, 100);
    const before = await store.consume('tz', tokyo, ban, 3);
    expect(before).toMatchObject({ verdict: 'allowed', dayCount: 3, monthCount: 3 });
    degraded.heard('tz', before);
    for (let i = 0; i < 7; i++) expect((await degraded.decide('tz', tokyo, ban, 1)).outcome.verdict).toBe('allowed');
    degraded.recovered();
    await expect.poll(async () => (await store.usage('tz', tokyo)).monthCount).toBe(10);
    expect(await store.usage('tz', tokyo)).toMatchObject({ dayCount: 10, monthCount: 10 });
    degraded.close();
  });

  it('tells the lease holders of the subject, in a notice they read', async () => {
    const store = new RedisQuotaStore(redis.client());
    const notices: QuotaNotice[] = [];
    store.notices(
      (notice) => notices.push(notice),
      () => {},
    );
    await store.noticesReady;
    const quota: Quota = { perMinute: 1000, perDay: 10_000 };
    const grant = await store.reserve('held', quota, ban, {
      want: 50,
      divisor: 2,
      minBlock: 1,
      giveBack: 0,
      giveBackMinuteStartMs: 0,
      giveBackDayStartMs: 0,
      leaseMs: 60_000,
      holder: 'other-replica',
      ends: false,
      heldUntilMs: 0,
    });
    expect(grant.granted).toBe(50);
    const degraded = new DegradedMode('open', 1, store, logger, 100);
    degraded.admittedOpen('held', 4);
    degraded.recovered();
    await expect.poll(() => notices.filter((notice) => notice.dayCount === 54).length).toBe(1);
    degraded.close();
    await store.close();
  });
});
