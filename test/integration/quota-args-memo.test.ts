import { afterEach, describe, expect, it, vi } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { redisForFile } from '../helpers/redis-for-file.js';

// QUOTA_SCRIPT's fixed arguments are one array per quota object, ban, recall flag, clock argument
// and month edges (redis-quota-store.ts, quotaArgs), reused while those are the same: in
// production the clock argument is Redis's own ('') all day, so only the month edges (from this
// replica's clock, in the quota's zone) can tell a day or month edge has been crossed. The system
// clock is faked here (no timer is), the store runs as in production (no test clock).

const redis = redisForFile();
const ban: BanPolicy = { afterRejections: 3, window: 60, duration: 90 };
type Args = ReadonlyArray<string | number>;
interface Inside {
  quotaArgs(quota: Quota, ban: BanPolicy, recall: boolean): Args;
  buildQuotaArgs(quota: Quota, ban: BanPolicy, recall: boolean, now: string | number, month: readonly number[]): Args;
  monthArgs(quota: Quota): readonly number[];
}

function storeInside(): Inside {
  return new RedisQuotaStore(redis.client()) as unknown as Inside;
}

/** What the arguments are when built afresh at this moment. */
function fresh(store: Inside, quota: Quota, recall = false): Args {
  return store.buildQuotaArgs(quota, ban, recall, '', store.monthArgs(quota));
}

afterEach(() => {
  vi.useRealTimers();
});

describe('quota arguments built once per plan', () => {
  it('follow the day and the billing month across their edges in the quota zone', () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const store = storeInside();
    const zoned: Quota = { perMinute: 5, perDay: 50, perMonth: 500, calendar: { timeZone: 'Pacific/Chatham', anchorDay: 17 } };
    // 23:59:59.999 in Chatham (UTC+13:45 on 16 Dec 2026) on the day before the billing anchor.
    const edge = Date.UTC(2026, 11, 16, 10, 14, 59, 999);
    vi.setSystemTime(edge);
    const before = store.quotaArgs(zoned, ban, false);
    expect(store.quotaArgs(zoned, ban, false)).toBe(before);
    vi.setSystemTime(edge + 1);
    const after = store.quotaArgs(zoned, ban, false);
    expect(after).not.toEqual(before);
    expect(after).toEqual(fresh(store, zoned));
  });

  it('are one array per plan while plans with and without a month limit alternate in one zone', () => {
    const store = storeInside();
    const monthly: Quota = { perMinute: 5, perDay: 50, perMonth: 500 };
    const daily: Quota = { perMinute: 5, perDay: 50 };
    const first = store.quotaArgs(monthly, ban, false);
    const other = store.quotaArgs(daily, ban, false);
    expect(store.quotaArgs(monthly, ban, false)).toBe(first);
    expect(store.quotaArgs(daily, ban, false)).toBe(other);
    expect(first).toEqual(fresh(store, monthly));
    expect(other).toEqual(fresh(store, daily));
  });

  it('tell recall and ban apart', () => {
    const store = storeInside();
    const quota: Quota = { perMinute: 5, perDay: 50 };
    const stricter: BanPolicy = { ...ban, afterRejections: 1 };
    const plain = store.quotaArgs(quota, ban, false);
    const recalled = store.quotaArgs(quota, ban, true);
    const banned = store.quotaArgs(quota, stricter, false);
    expect(recalled).toEqual(fresh(store, quota, true));
    expect(banned).toEqual(store.buildQuotaArgs(quota, stricter, false, '', store.monthArgs(quota)));
    expect(new Set([plain, recalled, banned]).size).toBe(3);
    expect(store.quotaArgs(quota, ban, false)).toBe(plain);
  });
});
