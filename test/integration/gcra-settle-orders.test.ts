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
// The tests marked it.fails show what is known and not mended yet: each fails (turns red) once it is.
// A reservation's end is recorded when it is admitted; another refund that lowers the TAT first
// leaves it stale (too high: over-admission; or the TAT below it: nothing comes back). Mending it
// needs the store to tell a settlement how far the TAT has moved down since its reservation.

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
  const reserve = async (id: string, units: number) => {
    const outcome = await store.consume(subject, GCRA, ban, units);
    expect(outcome.verdict).toBe('allowed');
    reservations.set(id, { outcome, reserve: units, nowMs: clock.nowMs });
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
  it.fails(
    "KNOWN: an earlier reservation settled first moves a later one down: the later one's stale end then frees past slots (over-admission)",
    async () => {
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
    },
  );

  it.fails(
    'KNOWN: two reservations both settled at 0 before anything else, the earlier first: all 20 should come back (under-admission)',
    async () => {
      const h = harness(kind);
      await h.reserve('C', 10);
      await h.reserve('A', 10);
      await h.settle('C', 0);
      await h.settle('A', 0);
      // Nothing was used and nothing charged after them: the whole burst is free again.
      const n = await h.fill();

      expect(n).toBe(burst);
    },
  );

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
