import { describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { leaseAsk, leaseEnd } from '../helpers/lease-requests.js';
import { redisForFile } from '../helpers/redis-for-file.js';

// LEASE_SCRIPT's give-back (a step wanting no block) keeps a stored day or month its own calendar
// reads as ended while the state lives. Under the SAME calendar, after a real midnight: the month
// still current is credited as ever, the next decisions count the new day from 0, and a later
// give-back of another replica's block of that day stays exact. A key whose anchor moved: a lease
// under the new quota still gets its units back after the old lease's give-back. One real
// redis-server, one injected clock.

const redis = redisForFile();
const ban: BanPolicy = { afterRejections: 1000, window: 60, duration: 60 };
const DAY_MS = 86_400_000;
const MIDNIGHT = Date.UTC(2031, 2, 5);

function store(at: number) {
  const clock = { nowMs: at };
  return { clock, store: new RedisQuotaStore(redis.client(), () => clock.nowMs) };
}

const monthly: Quota = { perMinute: 100_000, perDay: 1_000_000, perMonth: 10_000_000, calendar: { timeZone: 'UTC' } };

describe('a give-back after a real midnight, the same calendar', () => {
  it('credits the month, counts the new day from 0, and a second replica gives back exactly', async () => {
    const { clock, store: s } = store(MIDNIGHT - 500);
    const subject = 'kept-midnight';
    const a = await s.reserve(subject, monthly, ban, leaseAsk(1, 20, 0, 'a'));
    const b = await s.reserve(subject, monthly, ban, leaseAsk(1, 30, 0, 'b'));
    expect(a.granted + b.granted).toBe(50);
    clock.nowMs = MIDNIGHT + 500;
    await s.reserve(subject, monthly, ban, leaseEnd(monthly, a, 1, 15, 1, 'a'));
    expect((await s.usage(subject, monthly)).monthCount).toBe(35);
    expect((await s.usage(subject, monthly)).dayCount ?? 0).toBe(0);
    await s.reserve(subject, monthly, ban, leaseEnd(monthly, b, 1, 10, 1, 'b'));
    expect((await s.usage(subject, monthly)).monthCount).toBe(25);
    const next = await s.consume(subject, monthly, ban, 1);
    expect(next.verdict).toBe('allowed');
    expect(next.dayCount).toBe(1);
    expect(next.monthCount).toBe(26);
  });

  it("the give-back's usage hash, lost meanwhile, gets no other period than its day's", async () => {
    const { clock, store: s } = store(MIDNIGHT + DAY_MS - 500);
    const subject = 'kept-midnight-usage';
    const a = await s.reserve(subject, monthly, ban, leaseAsk(1, 20, 0, 'a'));
    expect(a.granted).toBe(20);
    const usageKey = `tg:usage:{${subject}}:${a.dayStartMs}`;
    expect(await redis.client().hget(usageKey, 'p')).toBeTruthy();
    const before = await redis.client().hget(usageKey, 'p');
    await redis.client().del(usageKey);
    clock.nowMs = MIDNIGHT + DAY_MS + 500;
    await s.reserve(subject, monthly, ban, { ...leaseEnd(monthly, a, 1, 15, 1, 'a'), giveBackRequests: 5 });
    const p = (await redis.client().hget(usageKey, 'p')) ?? '';
    const [dayEnd] = p.split(' ').map(Number);
    // Its day's end, or 0 (not known): never another moment.
    expect([0, Number(before?.split(' ')[0])]).toContain(dayEnd);
  });

  it('the hash keeps its expiry', async () => {
    const { clock, store: s } = store(MIDNIGHT + 2 * DAY_MS - 500);
    const subject = 'kept-midnight-ttl';
    const a = await s.reserve(subject, monthly, ban, leaseAsk(1, 20, 0, 'a'));
    const key = `tg:quota:{${subject}}`;
    const ex = Number(await redis.client().hget(key, 'ex'));
    clock.nowMs = MIDNIGHT + 2 * DAY_MS + 500;
    await s.reserve(subject, monthly, ban, leaseEnd(monthly, a, 1, 15, 1, 'a'));
    expect(Number(await redis.client().hget(key, 'ex'))).toBe(ex);
    const ttl = await redis.client().pttl(key);
    expect(ttl).toBeGreaterThan(0);
  });
});

describe("an anchor moved: the new quota's lease still gives back exactly", () => {
  it('after the old lease gave back under the old calendar', async () => {
    const before: Quota = { ...monthly, calendar: { timeZone: 'UTC' } };
    const after: Quota = { ...monthly, calendar: { timeZone: 'UTC', anchorDay: 15 } };
    const { clock, store: s } = store(MIDNIGHT + 10 * 3_600_000);
    const subject = 'kept-anchor';
    const a = await s.reserve(subject, before, ban, leaseAsk(1, 20, 0, 'a'));
    expect(a.granted).toBe(20);
    clock.nowMs += 100;
    const b = await s.reserve(subject, after, ban, leaseAsk(1, 30, 0, 'b'));
    expect(b.granted).toBe(30);
    expect((await s.usage(subject, after)).monthCount).toBe(30);
    clock.nowMs += 100;
    await s.reserve(subject, before, ban, leaseEnd(before, a, 1, 15, 1, 'a'));
    expect((await s.usage(subject, after)).monthCount).toBe(30);
    clock.nowMs += 100;
    await s.reserve(subject, after, ban, leaseEnd(after, b, 1, 25, 1, 'b'));
    expect((await s.usage(subject, after)).monthCount).toBe(5);
    expect((await s.usage(subject, after)).dayCount).toBe(10);
  });
});
