import { describe, expect, it } from 'vitest';
import type { Quota } from '../../src/config/plans-schema.js';
import { gcraMinute } from '../../src/quota/gcra.js';
import { reportedValue } from '../../src/gateway/reported-cost/reported-value.js';
import { MemoryQuotaStore } from '../../src/store/memory/memory-quota-store.js';
import type { Settlement } from '../../src/quota/quota-state.js';

// A reservation settled to the cost the upstream reported (quota-state.ts settle()), on the memory
// store with an injected clock: the extra charged past the limits, the rest given back only to the
// windows it was taken from, credits never below zero, and each settlement applied once.

const ban = { afterRejections: 100, window: 60, duration: 900 };
const T0 = Date.UTC(2026, 10, 22, 10, 0, 20);
const MINUTE = 60_000;
const plain: Quota = { perMinute: 50, perDay: 100 };
const monthly: Quota = { perMinute: 50, perDay: 100, perMonth: 1000 };
const prepaid: Quota = { perMinute: 50, perDay: 100, credits: 'required' };
const windowsAtT0 = { minuteStartMs: T0 - (T0 % MINUTE), dayStartMs: T0 - (T0 % 86_400_000), monthStartMs: Date.UTC(2026, 10, 1) };

/** A store on a clock the test moves, and a reservation of `reserve` units admitted at T0. */
async function reserved(quota: Quota, reserve: number) {
  const clock = { now: T0 };
  const store = new MemoryQuotaStore(() => clock.now);
  const outcome = await store.consume('k', quota, ban, reserve);
  expect(outcome.verdict).toBe('allowed');
  const settlement = (cost: number, id = 'r1'): Settlement & { id: string } => ({
    ...windowsAtT0,
    id,
    reserve,
    cost,
    tatUs: outcome.minuteTatUs,
    admittedAtMs: outcome.nowMs,
    admittedMoveNo: outcome.moveNo,
  });
  return { clock, store, settlement };
}

describe('settling a reserved cost (memory store)', () => {
  it('charges the extra of a higher cost to every window, even past their limits', async () => {
    const { store, settlement } = await reserved(monthly, 10);
    expect(await store.settle('k', monthly, ban, settlement(180))).toEqual({ applied: true, shortfall: 0, creditBalance: 0 });
    const usage = await store.usage('k', monthly);
    expect([usage.minuteCount, usage.dayCount, usage.monthCount]).toEqual([180, 180, 180]);
    // Later requests are refused: the windows are past their limits.
    expect((await store.consume('k', monthly, ban, 1)).verdict).toBe('limited');
  });

  it('gives back the rest of a lower cost to the windows it was taken from', async () => {
    const { store, settlement } = await reserved(monthly, 10);
    await store.settle('k', monthly, ban, settlement(3));
    const usage = await store.usage('k', monthly);
    expect([usage.minuteCount, usage.dayCount, usage.monthCount]).toEqual([3, 3, 3]);
  });

  it('credits no window that has rolled over since the reservation (its counters are the new window’s)', async () => {
    const { clock, store, settlement } = await reserved(plain, 10);
    clock.now = T0 + MINUTE;
    await store.consume('k', plain, ban, 4);
    await store.settle('k', plain, ban, settlement(0));
    const usage = await store.usage('k', plain);
    // The new minute keeps its 4; the day, still the reservation's, gets its 10 back.
    expect([usage.minuteCount, usage.dayCount]).toEqual([4, 4]);
  });

  it('spends the extra from the credit balance but never below zero, and says what it could not hold', async () => {
    const store = new MemoryQuotaStore(() => T0);
    await store.changeCredits('k', { set: 35 });
    expect((await store.consume('k', prepaid, ban, 10)).creditBalance).toBe(25);
    const result = await store.settle('k', prepaid, ban, { ...windowsAtT0, id: 'r', reserve: 10, cost: 40 });
    // 30 more: the 25 the balance holds, and 5 it cannot (charged to the windows all the same).
    expect(result).toEqual({ applied: true, shortfall: 5, creditBalance: 0 });
    expect((await store.usage('k', prepaid)).dayCount).toBe(40);
    expect((await store.consume('k', prepaid, ban, 1)).verdict).toBe('unfunded');
  });

  it('gives the rest of a reservation back to the credit balance whole', async () => {
    const clock = { now: T0 };
    const store = new MemoryQuotaStore(() => clock.now);
    await store.changeCredits('k', { set: 100 });
    expect((await store.consume('k', prepaid, ban, 10)).creditBalance).toBe(90);
    const result = await store.settle('k', prepaid, ban, { ...windowsAtT0, id: 'r', reserve: 10, cost: 2 });
    expect(result).toEqual({ applied: true, shortfall: 0, creditBalance: 98 });
    expect((await store.changeCredits('k', {})).after).toBe(98);
  });

  it('applies a settlement once, whatever the retries under its id', async () => {
    const { store, settlement } = await reserved(plain, 10);
    await store.settle('k', plain, ban, settlement(30));
    expect((await store.settle('k', plain, ban, settlement(30))).applied).toBe(false);
    expect((await store.usage('k', plain)).dayCount).toBe(30);
    // Another reservation's settlement (another id) is its own.
    await store.settle('k', plain, ban, settlement(12, 'r2'));
    expect((await store.usage('k', plain)).dayCount).toBe(32);
  });

  it('never counts below zero, and counts no refusal towards a ban', async () => {
    const { store, settlement } = await reserved(plain, 10);
    await store.settle('k', plain, ban, settlement(0));
    await store.settle('k', plain, ban, { ...settlement(0), id: 'again' });
    const usage = await store.usage('k', plain);
    expect([usage.minuteCount, usage.dayCount, usage.rejections]).toEqual([0, 0, 0]);
  });

  it('moves a gcra plan’s minute TAT with the cells charged or given back', async () => {
    const gcra: Quota = { perMinute: 60, perDay: 1000, algorithm: 'gcra', burst: 20 };
    const { store, settlement } = await reserved(gcra, 10);
    const tatAfterReserve = (await store.usage('k', gcra)).minuteTatUs;
    await store.settle('k', gcra, ban, settlement(4));
    // 6 cells given back.
    expect((await store.usage('k', gcra)).minuteTatUs).toBe(tatAfterReserve - 6 * gcraMinute(gcra).intervalUs);
    // 6 cells charged on top of another reservation's 10 (a settlement of its own).
    await store.settle('k', gcra, ban, settlement(16, 'r2'));
    expect((await store.usage('k', gcra)).minuteTatUs).toBe(tatAfterReserve);
  });

  it('gives a gcra reservation back only the slots no later cell would fall below its use on', async () => {
    // T = 60 s / (79 − 20 + 1) = 1 s, burst 20. A reservation of 10 at T0 leaves the TAT at T0 + 10 s.
    const gcra: Quota = { perMinute: 79, perDay: 1000, algorithm: 'gcra', burst: 20 };
    const { intervalUs } = gcraMinute(gcra);
    const { clock, store, settlement } = await reserved(gcra, 10);
    // 5 s later the bucket is filled (cells charged above the reservation, at T0 + 5 s).
    clock.now = T0 + 5000;
    let filled = 0;
    while ((await store.consume('k', gcra, ban, 1)).verdict === 'allowed') filled++;
    expect(filled).toBe(15);
    // It settles at 0. Its slots below T0 + 5 s are past: taking them off would move the cells
    // charged at T0 + 5 s below their use (25 admitted in a moment where burst is 20). Only the
    // 5 at or after now come off.
    const before = (await store.usage('k', gcra)).minuteTatUs;
    await store.settle('k', gcra, ban, settlement(0));
    expect((await store.usage('k', gcra)).minuteTatUs).toBe(before - 5 * intervalUs);
    let again = 0;
    while ((await store.consume('k', gcra, ban, 1)).verdict === 'allowed') again++;
    expect(filled + again).toBeLessThanOrEqual(20);
    // Without the reservation's end (a lease's block admitted it), nothing comes off.
    const other = await reserved(gcra, 10);
    const tat = (await other.store.usage('k', gcra)).minuteTatUs;
    await other.store.settle('k', gcra, ban, { ...other.settlement(0), tatUs: 0 });
    expect((await other.store.usage('k', gcra)).minuteTatUs).toBe(tat);
  });
});

describe('reading a reported cost', () => {
  it('takes whole units, caps them at max, and refuses anything else', () => {
    expect(reportedValue('25', 1000)).toEqual({ units: 25, capped: false });
    expect(reportedValue(' 0 ', 1000)).toEqual({ units: 0, capped: false });
    expect(reportedValue('5000', 1000)).toEqual({ units: 1000, capped: true });
    for (const raw of ['', '-5', '2.5', '1e3', 'lots', '12 units', '1, 2', '0x10', '99999999999999999999'])
      expect(reportedValue(raw, 1000)).toBe('invalid');
  });
});
