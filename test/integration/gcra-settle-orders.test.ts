import fc from 'fast-check';
import { worstExcess, type Admission } from '../helpers/gcra-blocks.js';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { DegradedLedger } from '../../src/gateway/degraded-ledger.js';
import type { Quota } from '../../src/config/plans-schema.js';
import { gcraMinute } from '../../src/quota/gcra.js';
import type { QuotaOutcome, Settlement } from '../../src/quota/quota-state.js';
import { MemoryQuotaStore } from '../../src/store/memory/memory-quota-store.js';
import type { DegradedAdmissions, QuotaStore } from '../../src/store/quota-store.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { redisForFile } from '../helpers/redis-for-file.js';

// A gcra plan's settled reservations (quota-state.ts refundedTatUs, SETTLE_SCRIPT) several to a key,
// and unreplicated gcra writes re-added (RECONCILE_SCRIPT), tried as a reviewer would, on the memory
// store and a redis-server under one injected clock. T = 1 s, burst 20. GCRA's promise: in any span
// [a, b], at most burst + floor((b - a) / T) units.
// A reservation's end is recorded when it is admitted; another refund that lowers the TAT first
// leaves it stale (too high: over-admission, 29 where burst is 20; or the TAT below it: nothing
// came back). The stores keep the TAT's moves down (quota-state.ts TatMove), and a settlement
// finds where its cells are now from those since its admission.

const redis = redisForFile();
const ban = { afterRejections: 1_000_000, window: 60, duration: 60 };
const GCRA: Quota = { perMinute: 79, perDay: 100_000, algorithm: 'gcra', burst: 20 };
const { burst, intervalUs: T } = gcraMinute(GCRA);
const T0 = Date.UTC(2030, 0, 11, 9, 0, 20);

let subjects = 0;
function harness(kind: 'memory' | 'redis') {
  const clock = { nowMs: T0 };
  const store: QuotaStore =
    kind === 'memory' ? new MemoryQuotaStore(() => clock.nowMs) : new RedisQuotaStore(redis.client(), () => clock.nowMs);
  const subject = `rb-${kind}-${++subjects}`;
  const admitted: Admission[] = [];
  const reservations = new Map<string, { outcome: QuotaOutcome; reserve: number; nowMs: number }>();
  /** A reservation of `units` (it must be admitted, unless `mayBeRefused`). */
  const reserve = async (id: string, units: number, mayBeRefused = false) => {
    const outcome = await store.consume(subject, GCRA, ban, units);
    if (!mayBeRefused) expect(outcome.verdict).toBe('allowed');
    if (outcome.verdict === 'allowed') reservations.set(id, { outcome, reserve: units, nowMs: clock.nowMs });
    return outcome;
  };
  /** Settles `id` at `cost`; the reservation's units are filed at its admission at the real cost. */
  const settle = async (id: string, cost: number) => {
    const r = reservations.get(id)!;
    const startOf = (ms: number) => r.nowMs - (r.nowMs % ms);
    const s: Settlement & { id: string } = {
      id,
      reserve: r.reserve,
      cost,
      minuteStartMs: startOf(60_000),
      dayStartMs: startOf(86_400_000),
      monthStartMs: 0,
      tatUs: r.outcome.minuteTatUs,
      admittedAtMs: r.outcome.nowMs,
      admittedMoveNo: r.outcome.moveNo,
    };
    await store.settle!(subject, GCRA, ban, s);
    if (cost > 0) admitted.push({ atMs: r.nowMs, cost });
  };
  const fill = async (most = 200) => {
    let n = 0;
    while (n < most && (await store.consume(subject, GCRA, ban, 1)).verdict === 'allowed') n++;
    if (n > 0) admitted.push({ atMs: clock.nowMs, cost: n });
    return n;
  };
  const tat = async () => (await store.usage(subject, GCRA)).minuteTatUs;
  return { clock, store, subject, admitted, reserve, settle, fill, tat };
}

describe.each(['memory', 'redis'] as const)('gcra settlements of several reservations (%s store)', (kind) => {
  it("an earlier reservation settled first moves a later one down: the later one's slots are where they are now (once: 29 where burst is 20)", async () => {
    const h = harness(kind);
    // C then A, 10 each at T0: C's slots [T0, T0+10T), A's [T0+10T, T0+20T); A's end is T0 + 20 T.
    await h.reserve('C', 10);
    await h.reserve('A', 10);
    // C settles at 0 at T0: all 10 of its slots are at or after now and come off; A's cells move down to [T0, T0+10T).
    await h.settle('C', 0);
    // 9 s later the bucket is filled: cells charged on top of A's.
    h.clock.nowMs = T0 + 9000;
    const first = await h.fill();
    // A settles at 0. Only its slot [T0+9T, T0+10T) is at or after now: one cell may come off.
    // The rule reads A's end as T0+20T (stale) and takes floor(11) -> 10 off.
    await h.settle('A', 0);
    const again = await h.fill();

    expect(first + again).toBeLessThanOrEqual(burst);
    expect(worstExcess(h.admitted, GCRA)).toBeLessThanOrEqual(0);
  });

  it('two reservations both settled at 0 before anything else, the earlier first: all 20 come back (once: 10)', async () => {
    const h = harness(kind);
    await h.reserve('C', 10);
    await h.reserve('A', 10);
    await h.settle('C', 0);
    await h.settle('A', 0);
    // Nothing was used and nothing charged after them: the whole burst is free again.
    const n = await h.fill();

    expect(n).toBe(burst);
  });

  it("reservations settled in any order at any cost up to their reserve, the bucket filled between: GCRA's bound holds", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ reserve: fc.integer({ min: 1, max: 10 }), cost: fc.nat({ max: 10 }), waitMs: fc.nat({ max: 10_000 }) }), {
          minLength: 2,
          maxLength: 5,
        }),
        fc.nat(),
        async (reservations, order) => {
          const h = harness(kind);
          const open: Array<{ id: string; reserve: number; cost: number; waitMs: number }> = [];
          for (const [i, r] of reservations.entries()) {
            if ((await h.reserve(`r${i}`, r.reserve, true)).verdict === 'allowed') open.push({ id: `r${i}`, ...r });
          }
          // Settled in an order of their own, each after a wait and the bucket filled.
          let pick = order;
          while (open.length > 0) {
            const [r] = open.splice(pick % open.length, 1);
            pick = Math.floor(pick / 3) + 7;
            h.clock.nowMs += r!.waitMs;
            await h.fill();
            await h.settle(r!.id, Math.min(r!.cost, r!.reserve));
          }
          await h.fill();
          expect(worstExcess(h.admitted, GCRA)).toBeLessThanOrEqual(0);
        },
      ),
      {
        numRuns: 150,
        examples: [
          [
            [
              { reserve: 10, cost: 0, waitMs: 0 },
              { reserve: 10, cost: 0, waitMs: 9000 },
            ],
            0,
          ],
        ],
      },
    );
  });

  it('control: the same two settled latest first give all 20 back', async () => {
    const h = harness(kind);
    await h.reserve('C', 10);
    await h.reserve('A', 10);
    await h.settle('A', 0);
    await h.settle('C', 0);
    expect(await h.fill()).toBe(burst);
  });

  it('costs higher then lower: A reserves 5 and reports 12, B reserved after it reports 0; the promise holds', async () => {
    const h = harness(kind);
    await h.reserve('A', 5);
    await h.reserve('B', 10);
    h.clock.nowMs = T0 + 2000;
    await h.settle('A', 12);
    await h.settle('B', 0);
    await h.fill();
    h.clock.nowMs = T0 + 7000;
    await h.fill();

    expect(worstExcess(h.admitted, GCRA)).toBeLessThanOrEqual(0);
  });

  it('a settle after the TAT fell behind now changes nothing and the bucket is whole', async () => {
    const h = harness(kind);
    await h.reserve('A', 10);
    h.clock.nowMs = T0 + 30_000;
    await h.settle('A', 0);
    expect(await h.fill()).toBe(burst);
  });
});

describe('a lease block given back below a reservation (LEASE_SCRIPT moves the TAT down too)', () => {
  it("the reservation's slots moved down with it: its settlement frees only those still ahead", async () => {
    const h = harness('redis');
    const store = h.store as RedisQuotaStore;
    const lease = { divisor: 1, minBlock: 1, leaseMs: 1000, holder: 'blk', giveBackMinuteStartMs: 0, giveBackDayStartMs: 0 };
    // A block of 5 cells (charged as arriving at T0 + leaseMs: [T0 + 1 s, T0 + 6 s)), then a reservation of 10 above it.
    const block = await store.reserve(h.subject, GCRA, ban, { ...lease, want: 5, giveBack: 0, block: 1, ends: false, heldUntilMs: 0 });
    expect(block.granted).toBe(5);
    await h.reserve('R', 10);
    // The block comes back unused at once: R's cells move down by 5 (to end at T0 + 11 s).
    await store.reserve(h.subject, GCRA, ban, {
      ...lease,
      want: 0,
      giveBack: 5,
      giveBackBlock: 1,
      ends: true,
      heldUntilMs: block.nowMs + 1000,
      giveBackNo: 1,
      giveBackMinuteStartMs: block.minuteStartMs,
      giveBackDayStartMs: block.dayStartMs,
    });
    // 8 s later the bucket is filled, then R settles at 0: only its 3 slots still ahead come off.
    h.clock.nowMs = T0 + 8000;
    await h.fill();
    await h.settle('R', 0);
    await h.fill();

    expect(worstExcess(h.admitted, GCRA)).toBeLessThanOrEqual(0);
  });
});

describe('one packed Redis call', () => {
  it("a reservation packed in one turn with other requests of its key: its minuteTatUs (the settlement's tatUs) is its own end, not the call's last", async () => {
    const h = harness('redis');
    // One event-loop turn: 3 singles, a reservation of 10, 5 singles (one packed QUOTA_SCRIPT call).
    const calls: Promise<QuotaOutcome>[] = [];
    for (let i = 0; i < 3; i++) calls.push(h.store.consume(h.subject, GCRA, ban, 1));
    const resv = h.store.consume(h.subject, GCRA, ban, 10);
    for (let i = 0; i < 5; i++) calls.push(h.store.consume(h.subject, GCRA, ban, 1));
    const [r, ...rest] = await Promise.all([resv, ...calls]);
    expect(rest.every((o) => o.verdict === 'allowed')).toBe(true);

    expect(r.minuteTatUs).toBe(T0 * 1000 + 13 * T);
  });
});

describe('unreplicated gcra writes re-added (RECONCILE_SCRIPT)', () => {
  const quiet = pino({ level: 'silent' });
  it('the same batch applied twice charges the TAT once', async () => {
    const h = harness('redis');
    const ledger = new DegradedLedger(h.store, quiet, 'added', true);
    ledger.record(h.subject, { verdict: 'allowed', nowMs: T0, cost: 8, bannedUntilMs: 0 }, GCRA, 0, { spent: 0, leased: false });
    let batch: DegradedAdmissions | undefined;
    let replica = '';
    const spy = h.store.reconcile!.bind(h.store);
    (h.store as RedisQuotaStore).reconcile = async (s, r, b) => {
      batch = b;
      replica = r;
      return spy(s, r, b);
    };
    expect(await ledger.flush()).toBe(true);
    const once = await h.tat();
    expect(once).toBe(T0 * 1000 + 8 * T);
    // The same batch (same replica id and seq) again, e.g. a retried flush whose reply was lost: nothing more.
    await spy(h.subject, replica, batch!);
    await spy(h.subject, replica, batch!);
    expect(await h.tat()).toBe(once);
  });

  it("a batch re-added after its cells' slots have passed (failover slower than tau) charges nothing: the whole burst is admitted", async () => {
    const h = harness('redis');
    // The old master admitted the full burst at T0 (WAIT timed out; kept to be re-added) and died.
    const ledger = new DegradedLedger(h.store, quiet, 'added', true);
    ledger.record(h.subject, { verdict: 'allowed', nowMs: T0, cost: burst, bannedUntilMs: 0 }, GCRA, 0, { spent: 0, leased: false });
    h.admitted.push({ atMs: T0, cost: burst });
    // The new master is up 30 s later (tau = 20 s): the re-add comes then.
    h.clock.nowMs = T0 + 30_000;
    expect(await ledger.flush()).toBe(true);
    const n = await h.fill();

    // Had the old master lived, its TAT (T0 + 20 T) would be long past: the whole burst is free, and
    // GCRA's bound still holds. (Once, the batch was charged from now: 0 of 20.)
    expect(worstExcess([...h.admitted, { atMs: h.clock.nowMs, cost: burst - n }], GCRA)).toBeLessThanOrEqual(0);
    expect(n).toBe(burst);
  });

  it('a re-add while the new master already filled the bucket stops at now + tolerance: the next moment admits only the rate', async () => {
    const h = harness('redis');
    const ledger = new DegradedLedger(h.store, quiet, 'added', true);
    ledger.record(h.subject, { verdict: 'allowed', nowMs: T0, cost: 15, bannedUntilMs: 0 }, GCRA, 0, { spent: 0, leased: false });
    h.clock.nowMs = T0 + 5000;
    await h.fill();
    expect(await ledger.flush()).toBe(true);
    const tatAfter = await h.tat();
    h.clock.nowMs = T0 + 6000;
    const next = await h.fill();

    expect(tatAfter).toBeLessThanOrEqual((T0 + 5000) * 1000 + burst * T);
    expect(next).toBeLessThanOrEqual(1);
  });
});
