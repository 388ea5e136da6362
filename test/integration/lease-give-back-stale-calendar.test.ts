import { describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { leaseAsk, leaseEnd } from '../helpers/lease-requests.js';
import { redisForFile } from '../helpers/redis-for-file.js';

// A lease's give-back goes under the quota the lease was granted with (quota-leases.ts `end`; the
// give-back queue retries it so for up to a day). A key changed meanwhile (keys.onChange: its
// billing anchor or time zone moved) is counted under its new calendar by then, in a month or a
// day that begins elsewhere. The give-back, reading the stored month or day as ended by its own
// calendar, must not write them back at 0: what the key's new windows counted would be admitted
// again. It leaves them as stored and credits neither (the windows it came from are not current).
// One real redis-server, one injected clock.

const redis = redisForFile();
const ban: BanPolicy = { afterRejections: 1000, window: 60, duration: 60 };
const T0 = Date.UTC(2031, 2, 4, 10, 0, 5);

function replica() {
  const clock = { nowMs: T0 };
  const store = new RedisQuotaStore(redis.client(), () => clock.nowMs);
  return { clock, store };
}

const cases: Array<{ name: string; before: Quota; after: Quota; window: 'monthCount' | 'dayCount' }> = [
  {
    name: 'a billing anchor moved: the month counted since stays',
    before: { perMinute: 100_000, perDay: 1_000_000, perMonth: 10_000_000, calendar: { timeZone: 'UTC' } },
    after: { perMinute: 100_000, perDay: 1_000_000, perMonth: 10_000_000, calendar: { timeZone: 'UTC', anchorDay: 15 } },
    window: 'monthCount',
  },
  {
    name: 'a time zone moved: the day counted since stays',
    before: { perMinute: 100_000, perDay: 1_000_000, calendar: { timeZone: 'UTC' } },
    after: { perMinute: 100_000, perDay: 1_000_000, calendar: { timeZone: 'Asia/Tokyo' } },
    window: 'dayCount',
  },
];

describe("a lease's give-back under the calendar the key had before a change", () => {
  for (const { name, before, after, window } of cases)
    it(name, async () => {
      const { clock, store } = replica();
      const subject = `stale-calendar-${window}`;
      const grant = await store.reserve(subject, before, ban, leaseAsk(1, 20));
      expect(grant.granted).toBe(20);
      // The key changes; its requests are counted under the new calendar (its windows begin anew).
      clock.nowMs += 100;
      for (let i = 0; i < 40; i++) expect((await store.consume(subject, after, ban, 1)).verdict).toBe('allowed');
      const counted = (await store.usage(subject, after))[window] ?? 0;
      expect(counted).toBe(40);
      // The lease's end: 15 of its 20 units unused, given back under the quota it was granted with.
      clock.nowMs += 100;
      await store.reserve(subject, before, ban, leaseEnd(before, grant, 1, 15, 1));
      expect((await store.usage(subject, after))[window]).toBe(counted);
      // And the key's next decision under its quota counts on from there.
      expect((await store.consume(subject, after, ban, 1))[window]).toBe(counted + 1);
    });
});
