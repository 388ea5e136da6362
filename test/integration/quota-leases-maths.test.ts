import { describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { QuotaLeases, type LeaseSettings } from '../../src/quota/quota-leases.js';
import type { QuotaOutcome } from '../../src/quota/quota-state.js';
import { windowsOf } from '../../src/quota/rate-limit-headers.js';
import { periodsAt, pick } from '../../src/quota/calendar.js';
import { MINUTE_MS, windowStartMs } from '../../src/quota/windows.js';
import type { LeaseGrant, LeaseRequest } from '../../src/store/quota-store.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { random } from '../helpers/random.js';
import { redisForFile } from '../helpers/redis-for-file.js';

// The lease maths on a real redis-server and one injected clock (Redis's and the replicas'):
// three replicas, each with its own leases, send one key's requests in a random order, at a rate
// far above its limit, across minute and day edges. Every admitted unit is filed under the UTC
// minute and day of the clock at the moment it was admitted; no window may hold more than its
// limit, and a window the load could fill must hold exactly its limit.

const redis = redisForFile();

const NO_BANS: BanPolicy = { afterRejections: 1_000_000, window: 60, duration: 60 };
const SETTINGS: LeaseSettings = { leaseMs: 200, hotPerSecond: 5, minBlock: 2, maxBlock: 40, spread: 2, replicas: 3 };

interface Run {
  perMinute: Map<number, number>;
  /** Days and months of the quota's calendar (UTC days by default). */
  perDay: Map<number, number>;
  perMonth: Map<number, number>;
  leased: number;
  decided: number;
  reservations: number;
  /** Units held by the replica that "died" (never used nor given back). */
  lostUnits: number;
  lostInMinute?: number;
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

async function hammer(opts: {
  seed: number;
  startMs: number;
  steps: number;
  quota: Quota;
  subject: string;
  /** After this step replica 2 stops for good, its lease neither used nor given back (kill -9). */
  killAtStep?: number;
}): Promise<Run> {
  const next = random(opts.seed);
  const clock = { nowMs: opts.startMs };
  const run: Run = { perMinute: new Map(), perDay: new Map(), perMonth: new Map(), leased: 0, decided: 0, reservations: 0, lostUnits: 0 };
  const replicas = [0, 1, 2].map(() => {
    const store = new RedisQuotaStore(redis.client(), () => clock.nowMs);
    // What this replica knew at its last grant: the units admitted in that window by then.
    const known = { usedAtGrant: 0, leasedSince: 0 };
    const counted = {
      reserve: async (id: string, quota: Quota, ban: BanPolicy, request: LeaseRequest): Promise<LeaseGrant> => {
        run.reservations++;
        const grant = await store.reserve(id, quota, ban, request);
        if (grant.granted > 0) Object.assign(known, { usedAtGrant: run.perMinute.get(grant.minuteStartMs) ?? 0, leasedSince: 0 });
        return grant;
      },
    };
    return { store, known, leases: new QuotaLeases(counted, SETTINGS, () => clock.nowMs) };
  });
  const admitted = (units: number) => {
    const minute = windowStartMs(clock.nowMs, MINUTE_MS);
    const periods = periodsAt(clock.nowMs, opts.quota.calendar);
    const [day] = pick(periods.day, clock.nowMs);
    const [month] = pick(periods.month, clock.nowMs);
    run.perMinute.set(minute, (run.perMinute.get(minute) ?? 0) + units);
    run.perDay.set(day, (run.perDay.get(day) ?? 0) + units);
    run.perMonth.set(month, (run.perMonth.get(month) ?? 0) + units);
  };
  try {
    for (let step = 0; step < opts.steps; step++) {
      clock.nowMs += Math.floor(next() * 24);
      // Killed at the first chance from killAtStep on while it holds a lease.
      const held = replicas[2]!.leases.held(opts.subject);
      if (opts.killAtStep !== undefined && step >= opts.killAtStep && run.lostInMinute === undefined && held > 0) {
        run.lostUnits = held;
        run.lostInMinute = windowStartMs(clock.nowMs, MINUTE_MS);
      }
      const alive = run.lostInMinute === undefined ? 3 : 2;
      const { store, leases, known } = replicas[Math.floor(next() * alive)]!;
      const cost = next() < 0.2 ? 3 : 1;
      let outcome: QuotaOutcome | undefined = await leases.admit(opts.subject, opts.quota, NO_BANS, cost);
      if (outcome) {
        run.leased++;
        known.leasedSince += cost;
        // Headers: never more remaining than was left when this replica last heard from Redis,
        // less what it has admitted on its lease since (docs/quota-leases.md).
        const [minute] = windowsOf(opts.quota, outcome).filter((w) => w.name === 'minute');
        expect(minute!.remaining).toBeGreaterThanOrEqual(0);
        expect(minute!.remaining).toBeLessThanOrEqual(opts.quota.perMinute - known.usedAtGrant - known.leasedSince);
      } else {
        outcome = await store.consume(opts.subject, opts.quota, NO_BANS, cost);
        run.decided++;
      }
      if (outcome.verdict === 'allowed') admitted(cost);
      if (step % 4 === 0) await settle();
    }
  } finally {
    // The "killed" replica's leases are dropped without giving back: only the others close.
    await Promise.all(replicas.map((r, i) => (run.lostInMinute !== undefined && i === 2 ? Promise.resolve() : r.leases.close())));
  }
  return run;
}

/** The minute windows the run covered whole (not its first and last). */
function wholeMinutes(run: Run): Array<[number, number]> {
  return [...run.perMinute.entries()].slice(1, -1);
}

describe('quota leases on one injected clock', { timeout: 120_000 }, () => {
  it('never admit more than the minute limit, and admit all of it under overload, across minute edges', async () => {
    const quota: Quota = { perMinute: 400, perDay: 1_000_000 };
    const startMs = Date.UTC(2030, 0, 10, 12, 0, 50);
    const run = await hammer({ seed: 1, startMs, steps: 8_000, quota, subject: 'lease-minute' });
    for (const [, units] of run.perMinute) expect(units).toBeLessThanOrEqual(400);
    expect(wholeMinutes(run).length).toBeGreaterThanOrEqual(1);
    for (const [, units] of wholeMinutes(run)) expect(units).toBe(400);
    // Leases were used, and saved Redis most of the traffic until the limit.
    expect(run.leased).toBeGreaterThan(600);
  });

  it('never admit more than the day limit, across midnight UTC', async () => {
    const quota: Quota = { perMinute: 400, perDay: 700 };
    const startMs = Date.UTC(2030, 0, 10, 23, 59, 20);
    const run = await hammer({ seed: 2, startMs, steps: 10_000, quota, subject: 'lease-day' });
    for (const [, units] of run.perMinute) expect(units).toBeLessThanOrEqual(400);
    for (const [, units] of run.perDay) expect(units).toBeLessThanOrEqual(700);
    // The day that started at midnight was filled: 400 in its first minute, 300 in the next.
    expect(run.perDay.get(Date.UTC(2030, 0, 11))).toBe(700);
  });

  it('never admit more than the month limit, across the month edge of Berlin', async () => {
    // December begins in Berlin at 2026-11-30T23:00Z; the run starts 30 s before and lasts about two minutes.
    const quota: Quota = { perMinute: 400, perDay: 500, perMonth: 500, calendar: { timeZone: 'Europe/Berlin' } };
    const december = Date.UTC(2026, 10, 30, 23);
    const run = await hammer({ seed: 4, startMs: december - 30_000, steps: 10_000, quota, subject: 'lease-month' });
    for (const [, units] of run.perMinute) expect(units).toBeLessThanOrEqual(400);
    for (const [, units] of run.perDay) expect(units).toBeLessThanOrEqual(500);
    for (const [, units] of run.perMonth) expect(units).toBeLessThanOrEqual(500);
    // November's last 30 s took a minute's worth; December was filled, its month binding by its second minute.
    expect(run.perMonth.get(Date.UTC(2026, 9, 31, 23))).toBe(400);
    expect(run.perMonth.get(december)).toBe(500);
    expect(run.leased).toBeGreaterThan(300);
  });

  it('a replica that dies holding a lease loses at most that lease for that window', async () => {
    const quota: Quota = { perMinute: 500, perDay: 1_000_000 };
    const startMs = Date.UTC(2030, 0, 10, 12, 5, 0);
    const run = await hammer({ seed: 3, startMs, steps: 7_000, quota, subject: 'lease-kill', killAtStep: 0 });
    expect(run.lostUnits).toBeGreaterThan(0);
    for (const [, units] of run.perMinute) expect(units).toBeLessThanOrEqual(500);
    const inThatMinute = run.perMinute.get(run.lostInMinute!)!;
    expect(inThatMinute).toBeGreaterThanOrEqual(500 - run.lostUnits);
    // The next whole minute is not affected.
    expect(run.perMinute.get(run.lostInMinute! + MINUTE_MS)).toBe(500);
  });

  it('gives back a lease that ends in its window, and credits nothing to a window that rolled over', async () => {
    const quota: Quota = { perMinute: 10_000, perDay: 1_000_000 };
    const clock = { nowMs: Date.UTC(2030, 0, 10, 12, 7, 30) };
    const store = new RedisQuotaStore(redis.client(), () => clock.nowMs);
    const reserve = (request: Partial<LeaseRequest>) =>
      store.reserve('lease-give-back', quota, NO_BANS, {
        want: 0,
        divisor: 1,
        minBlock: 1,
        giveBack: 0,
        giveBackMinuteStartMs: 0,
        giveBackDayStartMs: 0,
        leaseMs: 0,
        holder: 'test',
        ends: false,
        heldUntilMs: 0,
        ...request,
      });
    const grant = await reserve({ want: 100, divisor: 4 });
    expect(grant).toMatchObject({ granted: 100, minuteCount: 100, dayCount: 100 });
    const back = await reserve({ giveBack: 60, giveBackMinuteStartMs: grant.minuteStartMs, giveBackDayStartMs: grant.dayStartMs });
    expect(back).toMatchObject({ granted: 0, minuteCount: 40, dayCount: 40 });
    // A block is at most the units left / divisor; below minBlock none.
    expect(await reserve({ want: 100_000, divisor: 4 })).toMatchObject({ granted: (10_000 - 40) / 4 });
    clock.nowMs += MINUTE_MS;
    const late = await reserve({ giveBack: 40, giveBackMinuteStartMs: grant.minuteStartMs, giveBackDayStartMs: grant.dayStartMs });
    // The new minute is not credited; the day (same UTC day) is.
    expect(late).toMatchObject({ minuteCount: 0, dayCount: 40 + 2490 - 40 });
    expect((await reserve({ want: 10, divisor: 1, minBlock: 11 })).granted).toBe(0);
  });
});
