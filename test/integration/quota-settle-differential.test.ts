import { describe, expect, it } from 'vitest';
import type { Quota } from '../../src/config/plans-schema.js';
import { periodsAt, pick } from '../../src/quota/calendar.js';
import type { QuotaOutcome } from '../../src/quota/quota-state.js';
import { MINUTE_MS, windowStartMs } from '../../src/quota/windows.js';
import { MemoryQuotaStore } from '../../src/store/memory/memory-quota-store.js';
import type { QuotaStore } from '../../src/store/quota-store.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { random } from '../helpers/random.js';
import { redisForFile } from '../helpers/redis-for-file.js';

// Settlements of reported costs (SETTLE_SCRIPT and quota-state.ts settle()) on the memory store
// and a real redis-server under one injected clock: random histories of reservations, settlements
// (some retried under the same id, some after their minute or day rolled over), credit top-ups
// and ordinary requests give identical answers and identical usage on both.

const redis = redisForFile();
const ban = { afterRejections: 5, window: 60, duration: 120 };
const QUOTAS: Quota[] = [
  { perMinute: 40, perDay: 300 },
  { perMinute: 40, perDay: 300, perMonth: 500, calendar: { timeZone: 'Europe/Berlin' } },
  { perMinute: 40, perDay: 300, credits: 'required' },
  { perMinute: 60, perDay: 300, algorithm: 'gcra', burst: 10 },
];

interface Reservation {
  id: string;
  reserve: number;
  nowMs: number;
  /** gcra: the TAT it left (the TAT's moves since, SETTLE_SCRIPT's tg:tat-moves, are compared too), per store. */
  tatUs: number;
  moveNo: { memory: number; redis: number };
}

const brief = (o: QuotaOutcome) => [
  o.verdict,
  o.minuteCount,
  o.dayCount,
  o.monthCount ?? 0,
  o.rejections,
  o.bannedUntilMs,
  o.minuteTatUs,
  o.creditBalance ?? 0,
];

async function history(seed: number, quota: Quota, steps: number): Promise<void> {
  const next = random(seed);
  const int = (n: number) => Math.floor(next() * n);
  const clock = { nowMs: Date.UTC(2026, 2, 28, 22, 58, 30) };
  const memory: QuotaStore = new MemoryQuotaStore(() => clock.nowMs);
  const shared: QuotaStore = new RedisQuotaStore(redis.client(), () => clock.nowMs);
  const subject = `settle-${seed}-${QUOTAS.indexOf(quota)}`;
  const open: Reservation[] = [];
  const done: Array<Reservation & { cost: number; settledAtMs: number }> = [];
  for (let step = 0; step < steps; step++) {
    const roll = next();
    const context = `seed ${seed}, step ${step}`;
    if (roll < 0.1) {
      clock.nowMs += [1, 700, 20_000, 61_000, 3_600_000][int(5)]!;
    } else if (roll < 0.15) {
      const change = { add: int(200) };
      expect(await shared.changeCredits(subject, change), context).toEqual(await memory.changeCredits(subject, change));
    } else if (roll < 0.55) {
      const reserve = 1 + int(15);
      const [a, b] = [await memory.consume(subject, quota, ban, reserve), await shared.consume(subject, quota, ban, reserve)];
      expect(brief(b), context).toEqual(brief(a));
      if (a.verdict === 'allowed') {
        open.push({
          id: `${seed}-${step}`,
          reserve,
          nowMs: a.nowMs,
          tatUs: a.minuteTatUs,
          moveNo: { memory: a.moveNo ?? 0, redis: b.moveNo ?? 0 },
        });
      }
    } else if (roll < 0.9 && open.length > 0) {
      const reservation = open.splice(int(open.length), 1)[0]!;
      const cost = int(3 * reservation.reserve + 1);
      const settlement = { ...settlementOf(reservation, quota), cost };
      expect(await shared.settle!(subject, quota, ban, { ...settlement, admittedMoveNo: reservation.moveNo.redis }), context).toEqual(
        await memory.settle!(subject, quota, ban, { ...settlement, admittedMoveNo: reservation.moveNo.memory }),
      );
      done.push({ ...reservation, cost, settledAtMs: clock.nowMs });
    } else if (done.length > 0 && clock.nowMs - done.at(-1)!.settledAtMs < 60_000) {
      // A retry of a settlement just applied (retries last seconds; the stores remember ids for minutes).
      const again = done.at(-1)!;
      const settlement = { ...settlementOf(again, quota), cost: again.cost };
      const [a, b] = [
        await memory.settle!(subject, quota, ban, { ...settlement, admittedMoveNo: again.moveNo.memory }),
        await shared.settle!(subject, quota, ban, { ...settlement, admittedMoveNo: again.moveNo.redis }),
      ];
      expect([a.applied, b.applied], context).toEqual([false, false]);
    }
    expect(brief(await shared.usage(subject, quota)), context).toEqual(brief(await memory.usage(subject, quota)));
  }
}

function settlementOf({ id, reserve, nowMs, tatUs }: Omit<Reservation, 'moveNo'>, quota: Quota) {
  const periods = periodsAt(nowMs, quota.calendar);
  return {
    id,
    reserve,
    minuteStartMs: windowStartMs(nowMs, MINUTE_MS),
    dayStartMs: pick(periods.day, nowMs)[0],
    monthStartMs: pick(periods.month, nowMs)[0],
    tatUs,
    admittedAtMs: nowMs,
  };
}

describe('settling reported costs: the memory store and Redis agree', { timeout: 120_000 }, () => {
  for (const [i, quota] of QUOTAS.entries()) {
    it(`on random histories (${JSON.stringify(quota)})`, async () => {
      for (let seed = 1; seed <= 6; seed++) await history(seed * 10 + i, quota, 150);
    });
  }
});
