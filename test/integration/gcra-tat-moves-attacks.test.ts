import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Quota } from '../../src/config/plans-schema.js';
import { gcraMinute } from '../../src/quota/gcra.js';
import { TAT_MOVES_KEPT, type QuotaOutcome, type Settlement } from '../../src/quota/quota-state.js';
import { MemoryQuotaStore } from '../../src/store/memory/memory-quota-store.js';
import type { QuotaStore } from '../../src/store/quota-store.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { quotaKey, tatMovesKey } from '../../src/store/redis/redis-keys.js';
import { worstExcess, type Admission } from '../helpers/gcra-blocks.js';
import { redisForFile } from '../helpers/redis-for-file.js';

// A reviewer's attacks on the TAT's moves (quota-state.ts TatMove: a reservation's end follows the
// moves numbered after its admission), both stores under one injected clock: many in one ms, a clock
// that steps back, retries, a tolerance changed, the state lost, a hot key's log. T = 1 s, burst 20
// unless said otherwise. it.fails: known and not mended (each turns red once it is).

const redis = redisForFile();
const ban = { afterRejections: 1_000_000, window: 60, duration: 60 };
const GCRA: Quota = { perMinute: 79, perDay: 1_000_000, algorithm: 'gcra', burst: 20 };
const T0 = Date.UTC(2030, 0, 11, 9, 0, 20);

let subjects = 0;
function harness(kind: 'memory' | 'redis', quota: Quota = GCRA) {
  const clock = { nowMs: T0 };
  const plan = { quota };
  const store: QuotaStore =
    kind === 'memory' ? new MemoryQuotaStore(() => clock.nowMs) : new RedisQuotaStore(redis.client(), () => clock.nowMs);
  const subject = `rv-${kind}-${++subjects}`;
  /** Cells the gate admitted (a settlement's extra above its reserve is charged past the limits: not counted). */
  const admitted: Admission[] = [];
  const reservations = new Map<string, { outcome: QuotaOutcome; reserve: number; nowMs: number }>();
  const reserve = async (id: string, units: number, mayBeRefused = false) => {
    const outcome = await store.consume(subject, plan.quota, ban, units);
    if (!mayBeRefused) expect(outcome.verdict).toBe('allowed');
    if (outcome.verdict === 'allowed') reservations.set(id, { outcome, reserve: units, nowMs: clock.nowMs });
    return outcome;
  };
  const settlementOf = (id: string, cost: number): Settlement & { id: string } => {
    const r = reservations.get(id)!;
    const startOf = (ms: number) => r.nowMs - (r.nowMs % ms);
    return {
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
  };
  const settle = async (id: string, cost: number) => {
    const r = reservations.get(id)!;
    await store.settle!(subject, plan.quota, ban, settlementOf(id, cost));
    if (Math.min(cost, r.reserve) > 0) admitted.push({ atMs: r.nowMs, cost: Math.min(cost, r.reserve) });
  };
  const fill = async (most = 1000) => {
    let n = 0;
    while (n < most && (await store.consume(subject, plan.quota, ban, 1)).verdict === 'allowed') n++;
    if (n > 0) admitted.push({ atMs: clock.nowMs, cost: n });
    return n;
  };
  const tat = async () => (await store.usage(subject, plan.quota)).minuteTatUs;
  return { clock, plan, store, subject, admitted, reserve, settle, settlementOf, fill, tat };
}

describe.each(['memory', 'redis'] as const)('moves in the same millisecond as admissions (%s store)', (kind) => {
  it('property: reservations, settlements (below and above their reserve) and fills, many in one ms, any order: the bound holds', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.oneof(
            fc.record({ op: fc.constant('reserve' as const), units: fc.integer({ min: 1, max: 12 }) }),
            fc.record({ op: fc.constant('settle' as const), pick: fc.nat(), cost: fc.nat({ max: 14 }) }),
            fc.record({ op: fc.constant('fill' as const), most: fc.integer({ min: 1, max: 25 }) }),
            fc.record({ op: fc.constant('wait' as const), ms: fc.oneof(fc.constantFrom(1, 999, 1000, 1001), fc.nat({ max: 10_000 })) }),
          ),
          { minLength: 3, maxLength: 24 },
        ),
        async (ops) => {
          const h = harness(kind);
          const open: string[] = [];
          let n = 0;
          for (const op of ops) {
            if (op.op === 'reserve') {
              const id = `r${++n}`;
              if ((await h.reserve(id, op.units, true)).verdict === 'allowed') open.push(id);
            } else if (op.op === 'settle' && open.length > 0) {
              const [id] = open.splice(op.pick % open.length, 1);
              await h.settle(id!, op.cost);
            } else if (op.op === 'fill') await h.fill(op.most);
            else if (op.op === 'wait') h.clock.nowMs += op.ms;
          }
          for (const id of open) await h.settle(id, 0);
          await h.fill();
          h.clock.nowMs += 1000;
          await h.fill();
          expect(worstExcess(h.admitted, GCRA)).toBeLessThanOrEqual(0);
        },
      ),
      { numRuns: kind === 'memory' ? 3000 : 400 },
    );
  });

  // Once (moves found by time, the admission's own ms included to be safe) R read its end too low: 15 of 20 back.
  it('a move just before an admission in the same ms is not applied to it: all 20 come back', async () => {
    const h = harness(kind);
    // C (10) then S (5) at T0; C settles at 0 (move at T0, pos T0+10 s); R (10) admitted after it, same ms: [T0+5, T0+15).
    await h.reserve('C', 10);
    await h.reserve('S', 5);
    await h.settle('C', 0);
    await h.reserve('R', 10);
    // R and S used nothing: 15 cells should come back, the bucket whole again (20).
    await h.settle('R', 0);
    await h.settle('S', 0);
    const n = await h.fill();
    expect(worstExcess(h.admitted, GCRA)).toBeLessThanOrEqual(0);
    // The move at T0 (pos T0+10 s < R's end T0+15 s) is applied to R though R was admitted after it:
    // R reads its end as T0+5 s and frees only 5 (S's slots); nothing more comes back.
    expect(n).toBe(20);
  });
});

describe.each(['memory', 'redis'] as const)('proposed fix: moves read from a margin before the admission (%s store)', (kind) => {
  // A settlement that reads moves from before its admission (its admittedAtMs moved earlier by up
  // to 3 s here) reads its end too low, never too high: under-refund, the bound still holds. So a
  // margin (or a move sequence number taken at admission) closes the clock-step hole safely.
  it('property: admittedAtMs sent up to 3 s early, settlements in any order with fills between: the bound holds', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.oneof(
            fc.record({ op: fc.constant('reserve' as const), units: fc.integer({ min: 1, max: 12 }) }),
            fc.record({ op: fc.constant('settle' as const), pick: fc.nat(), cost: fc.nat({ max: 12 }), early: fc.nat({ max: 3000 }) }),
            fc.record({ op: fc.constant('fill' as const), most: fc.integer({ min: 1, max: 25 }) }),
            fc.record({ op: fc.constant('wait' as const), ms: fc.oneof(fc.constantFrom(0, 1, 999, 1000), fc.nat({ max: 10_000 })) }),
          ),
          { minLength: 3, maxLength: 24 },
        ),
        async (ops) => {
          const h = harness(kind);
          const open: string[] = [];
          let n = 0;
          for (const op of ops) {
            if (op.op === 'reserve') {
              const id = `r${++n}`;
              if ((await h.reserve(id, op.units, true)).verdict === 'allowed') open.push(id);
            } else if (op.op === 'settle' && open.length > 0) {
              const [id] = open.splice(op.pick % open.length, 1);
              const s = h.settlementOf(id!, op.cost);
              await h.store.settle!(h.subject, GCRA, ban, { ...s, admittedAtMs: s.admittedAtMs! - op.early });
              const r = Math.min(op.cost, s.reserve);
              if (r > 0) h.admitted.push({ atMs: s.admittedAtMs!, cost: r });
            } else if (op.op === 'fill') await h.fill(op.most);
            else if (op.op === 'wait') h.clock.nowMs += op.ms;
          }
          await h.fill();
          h.clock.nowMs += 1000;
          await h.fill();
          expect(worstExcess(h.admitted, GCRA)).toBeLessThanOrEqual(0);
        },
      ),
      { numRuns: kind === 'memory' ? 3000 : 400 },
    );
  });
});

describe('retries of one settlement id', () => {
  it.each(['memory', 'redis'] as const)('%s: the same settlement three times, a move between: one refund', async (kind) => {
    const h = harness(kind);
    await h.reserve('C', 5);
    await h.reserve('A', 10);
    await h.settle('A', 0);
    await h.settle('C', 0);
    await h.settle('A', 0);
    await h.settle('C', 0);
    expect(await h.fill()).toBe(20);
    expect(worstExcess(h.admitted, GCRA)).toBeLessThanOrEqual(0);
  });
});

describe.each(['memory', 'redis'] as const)('a clock that steps back (%s store)', (kind) => {
  // Redis TIME after a failover to a master whose clock is behind, or an NTP step; Date.now() for
  // the memory store. A move stamped before the admission it follows is not read back.
  // Once (moves found by time) a move stamped before the admission it followed was skipped: excess 9.
  it('a move stamped 1 ms "before" an admission it came after still moves the reservation: the bound holds', async () => {
    const h = harness(kind);
    await h.reserve('C', 10); // [T0, T0+10 s)
    h.clock.nowMs = T0 + 5;
    await h.reserve('A', 10); // [T0+10 s, T0+20 s), admitted at T0+5 ms
    h.clock.nowMs = T0 + 4; // the clock steps back 1 ms
    await h.settle('C', 0); // A moves down to [T0, T0+10 s): move stamped T0+4 < A's admission
    h.clock.nowMs = T0 + 9000;
    await h.fill(); // 19 cells on top of A's (TAT T0+10 s -> T0+29 s)
    await h.settle('A', 0); // A reads its end as T0+20 s: 10 off instead of 1
    const again = await h.fill();
    expect(again).toBeLessThan(9);
    expect(worstExcess(h.admitted, GCRA)).toBeLessThanOrEqual(0);
  });
});

describe.each(['memory', 'redis'] as const)("the plan's tolerance raised between moves and a settlement (%s store)", (kind) => {
  // Moves are dropped τ after they happened (Redis on each write, memory on each read), with the
  // τ of the plan in force then. A larger τ later reads a reservation as young enough while the
  // moves below it are gone.
  // Not a bug: a move is pruned only τ after it happened, and the stale end of a reservation
  // admitted before it is at most admission + τ ≤ now then: no cell at or after now comes off.
  it('burst 5 -> 20 while a reservation is open: the moves it needs were pruned with the old τ, yet nothing comes off', async () => {
    const small: Quota = { perMinute: 79, perDay: 1_000_000, algorithm: 'gcra', burst: 5 };
    const h = harness(kind, small);
    const T = gcraMinute(small).intervalUs; // 60e6 / 75 = 800 ms
    await h.reserve('C', 2);
    await h.reserve('A', 3);
    await h.settle('C', 0); // move at T0 (pos below A)
    // 4.5 s later (> τ = 4 s) another move prunes the first (Redis) / a read drops it (memory).
    h.clock.nowMs = T0 + 4500;
    await h.reserve('D', 2);
    await h.reserve('E', 1);
    await h.settle('D', 0);
    // The plan now has burst 20 (T = 1 s, τ = 20 s): A (admitted 4.5 s ago) reads as young.
    h.plan.quota = GCRA;
    await h.fill();
    const before = await h.tat();
    await h.settle('A', 0);
    const after = await h.tat();
    // A's cells were at [T0, T0 + 3 × 0.8 s) in the old line: all passed by now. Nothing may come off.
    expect((before - after) / T).toBeLessThanOrEqual(0);
  });
});

describe('Redis lost the quota hash and its moves between an admission and its settlement (restart empty, failover)', () => {
  // A settlement's end is a place on a line that no longer exists. Its move number is of the lost
  // hash: a new hash numbers its moves from the time in µs at its first step (QUOTA_STEP), so the
  // moves between are missing, or the number is above the new hash's, and nothing comes off. (Before
  // that, both hashes numbered from 0: while the new one had no move, the stale end read as valid.)
  it('a settlement after the state was lost frees no cell admitted since', async () => {
    const h = harness('redis');
    await h.reserve('A', 10); // [T0, T0+10 s), admitted and used upstream (its cost counts at T0)
    await h.reserve('B', 10); // [T0+10 s, T0+20 s)
    // Redis restarts empty (or a failover to a replica that lacked these writes).
    await redis.client().del(quotaKey(h.subject), tatMovesKey(h.subject));
    h.clock.nowMs = T0 + 1000;
    await h.fill(); // the new line: 20 cells [T0+1 s, T0+21 s); the gateway admitted 20 + 20 at T0..T0+1 s already
    h.admitted.push({ atMs: T0, cost: 10 }); // A's 10 were used
    await h.settle('A', 10);
    await h.settle('B', 0); // B's end T0+20 s: 10 cells of the new line come off
    const again = await h.fill();
    console.log(`hash lost: again ${again}, excess ${worstExcess(h.admitted, GCRA)}`);
    // The loss itself admits a second burst; the settlement must not add to it. Measured (5299b68
    // and c2cbedf): 10 more at T0+1 s.
    expect(again).toBe(0);
  });

  it('nor after a move on the new line: the stale settlement does not take it for one of its own', async () => {
    const h = harness('redis');
    await h.reserve('A', 10);
    await h.reserve('B', 10); // [T0+10 s, T0+20 s) on the lost line
    await redis.client().del(quotaKey(h.subject), tatMovesKey(h.subject));
    h.clock.nowMs = T0 + 1000;
    await h.reserve('C', 10); // the new line: [T0+1 s, T0+11 s)
    await h.fill(); // [T0+11 s, T0+21 s)
    await h.settle('C', 5); // a move on the new line: 5 cells off
    expect(await h.fill()).toBe(5);
    await h.settle('B', 0);
    // Numbered from 0 on both hashes, B's number (0) and the new hash's one move read as B's
    // moves since: its end moved down 5, and 10 cells of the new line came off.
    expect(await h.fill()).toBe(0);
  });

  it("nor when the new master's clock is behind the old one (its numbers start below the lost ones)", async () => {
    const h = harness('redis');
    await h.reserve('A', 10); // [T0, T0+10 s) on the lost line
    await redis.client().del(quotaKey(h.subject), tatMovesKey(h.subject));
    h.clock.nowMs = T0 - 500;
    expect(await h.fill()).toBe(20); // [T0-0.5 s, T0+19.5 s)
    await h.settle('A', 0);
    expect(await h.fill()).toBe(0);
  });
});

describe('Redis CPU: the moves log of a hot gcra key', () => {
  it('keeps the last TAT_MOVES_KEPT moves; a reservation settled after more moves than that gives nothing back (conservative)', async () => {
    // burst = perMinute / 2: T = 0.6 ms, τ = 60 s: moves live long, and come fast.
    const big: Quota = { perMinute: 200_000, perDay: 1_000_000_000, algorithm: 'gcra', burst: 100_000 };
    const h = harness('redis', big);
    const client = redis.client();
    await h.reserve('OLD', 2);
    // More moves than are kept: reservations of 2, each settled at 1, 1 ms apart.
    for (let i = 0; i < TAT_MOVES_KEPT + 50; i++) {
      h.clock.nowMs = T0 + 1 + i;
      await h.reserve(`x${i}`, 2);
      await h.settle(`x${i}`, 1);
    }
    expect(await client.zcard(tatMovesKey(h.subject))).toBe(TAT_MOVES_KEPT);
    await h.reserve('NEW', 2);
    h.clock.nowMs += 1;
    const before = await h.tat();
    await h.settle('OLD', 0);
    expect(await h.tat()).toBe(before);
    // Settlements beside a full log: measured, not asserted (Redis CPU).
    await h.reserve('NEWER', 2);
    await client.config('RESETSTAT');
    await h.settle('NEW', 0);
    await h.settle('NEWER', 0);
    const evals = String(await client.info('commandstats'))
      .split('\n')
      .filter((l) => /cmdstat_(evalsha|eval)/.test(l));
    console.log(`two settles beside ${TAT_MOVES_KEPT} kept moves: ${evals.join(' ')}`);
  }, 120_000);
});
