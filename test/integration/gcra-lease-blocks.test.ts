import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import pino from 'pino';
import { DegradedLedger } from '../../src/gateway/degraded-ledger.js';
import { gcraMinute } from '../../src/quota/gcra.js';
import { leaseHoldersKey, quotaKey } from '../../src/store/redis/redis-keys.js';
import { gcraBlockStore, worstExcess, type Admission, type HeldBlock } from '../helpers/gcra-blocks.js';
import { redisForFile } from '../helpers/redis-for-file.js';

// gcra blocks' ends kept in Redis (rule 9 of src/quota/quota-leases.ts), tried as a reviewer would: one
// injected clock, blocks asked for and given back directly on the store, every admitted unit filed
// at the moment it was admitted (a block's units at the moment its holder used them), and GCRA's
// promise checked as gcra-leases-maths.test.ts does: in any span [a, b] at most
// burst + ⌊(b − a) / T⌋ units.

const redis = redisForFile();

const NO_BANS: BanPolicy = { afterRejections: 1_000_000, window: 60, duration: 60 };
/** T = 24,990 µs, burst 600 (τ ≈ 15 s): room for blocks. */
const QUOTA: Quota = { perMinute: 3000, perDay: 10_000_000, algorithm: 'gcra', burst: 600 };
const { burst, intervalUs: T } = gcraMinute(QUOTA);

/** A store on the test's own clock, asked for blocks of QUOTA directly; `fill` at most twice the burst. */
function blockStore(startMs: number) {
  const blocks = gcraBlockStore(redis.client(), QUOTA, NO_BANS, startMs);
  return { ...blocks, fill: (subject: string, most = 2 * burst) => blocks.fill(subject, most) };
}

const tat = async (subject: string) => Number(await redis.client().hget(quotaKey(subject), 'mt'));
const places = async (subject: string) => (await redis.client().hkeys(leaseHoldersKey(subject))).filter((f) => f.startsWith('b:'));

describe('gcra blocks kept in Redis', { timeout: 300_000 }, () => {
  it("a reservation's refund settled after a lease ended, before its block came back, takes nothing off the TAT: no later block is moved below its use", async () => {
    const t0 = Date.UTC(2030, 0, 11, 9, 0, 0);
    const L = 1000;
    const { clock, store, ask, back, fill } = blockStore(t0);
    const subject = 'settle-stale-end';
    const admitted: Admission[] = [];
    const startOf = (ms: number) => t0 - (t0 % ms);
    // A reservation of 10 (its upstream will report 2), and 71 direct units: the TAT is 81 T ahead.
    expect((await store.consume(subject, QUOTA, NO_BANS, 10)).verdict).toBe('allowed');
    admitted.push({ atMs: t0, cost: 2 });
    for (let i = 0; i < 71; i++) expect((await store.consume(subject, QUOTA, NO_BANS, 1)).verdict).toBe('allowed');
    admitted.push({ atMs: t0, cost: 71 });
    // Replica a's block of 10, on top (its end E_A = t0 + 91 T is kept in Redis). a uses none of it.
    const a = await ask(subject, { want: 10, holder: 'a' });
    expect(a.granted).toBe(10);
    expect(a.minuteTatUs).toBe(t0 * 1000 + 91 * T);
    // a's lease has ended ('le' = t0 + L), its give-back not yet sent (its sweep runs up to leaseMs/2 late).
    clock.nowMs = t0 + L;
    // The reservation settles at 2. No lease is in force, but a's block is still out (Redis keeps
    // its end): taking 8 T off would move it below its kept end, so the TAT stays. (Once, 8 T came
    // off, a's kept end stayed, and its give-back then moved b's block below its use: 606 > 600.)
    expect(
      (
        await store.settle(subject, QUOTA, NO_BANS, {
          id: 'r1',
          reserve: 10,
          cost: 2,
          minuteStartMs: startOf(60_000),
          dayStartMs: startOf(86_400_000),
          monthStartMs: 0,
        })
      ).applied,
    ).toBe(true);
    expect(await tat(subject)).toBe(t0 * 1000 + 91 * T);
    // Replica b's block starts at the TAT, on top of a's.
    const b = await ask(subject, { want: 10, holder: 'b' });
    expect(b.minuteTatUs).toBe(t0 * 1000 + 101 * T);
    // a's give-back arrives: its freed slots lie past every lease's end, so 10 T come off and b's block moves down onto them.
    await back(subject, a, 10);
    // b uses all of its block as late as its lease allows, then direct requests fill the bucket.
    clock.nowMs = t0 + 2 * L - 1;
    admitted.push({ atMs: clock.nowMs, cost: 10 });
    const direct = await fill(subject);
    admitted.push({ atMs: clock.nowMs, cost: direct });
    // In one millisecond: b's 10 and the direct ones, at most burst (600). GCRA's TAT after b's 10
    // would be now + 10 T, leaving 590.
    expect(10 + direct).toBeLessThanOrEqual(burst);
    expect(worstExcess(admitted, QUOTA)).toBeLessThanOrEqual(0);
  });

  it("a reservation's refund with no lease out takes off only its slots at or after now: cells charged since stay after their use", async () => {
    const t0 = Date.UTC(2030, 0, 11, 9, 6, 0);
    const { clock, store, fill } = blockStore(t0);
    const subject = 'settle-no-lease';
    const startOf = (ms: number) => t0 - (t0 % ms);
    // A reservation of 10 on an empty bucket: its slots are [t0, t0 + 10 T).
    const reservation = await store.consume(subject, QUOTA, NO_BANS, 10);
    // 125 ms (5 T) later, the bucket is filled.
    clock.nowMs = t0 + 125;
    const first = await fill(subject);
    // It settles at 0: only its slots at or after now come off (4), not the 5 already past.
    await store.settle(subject, QUOTA, NO_BANS, {
      id: 'r',
      reserve: 10,
      cost: 0,
      minuteStartMs: startOf(60_000),
      dayStartMs: startOf(86_400_000),
      monthStartMs: 0,
      tatUs: reservation.minuteTatUs,
      admittedAtMs: reservation.nowMs,
      admittedMoveNo: reservation.moveNo,
    });
    const again = await fill(subject);
    // In one moment: at most burst, and no cell lost but the one cut by the millisecond. (Once all 10 came off: 605.)
    expect(first + again).toBeLessThanOrEqual(burst);
    expect(first + again).toBeGreaterThanOrEqual(burst - 1);
  });

  it("control: the same steps with the block given back before the settle admit at most GCRA's bound", async () => {
    // As above, but a's give-back comes before the reservation settles: a's 10 come off (nothing
    // above them), the refund then comes off too, b's block is granted on the TAT, and nothing
    // moves it: what b uses late is charged after its use. (The refund alone is not the fault.)
    const t0 = Date.UTC(2030, 0, 11, 9, 1, 0);
    const L = 1000;
    const { clock, store, ask, back, fill } = blockStore(t0);
    const subject = 'settle-after-back';
    const admitted: Admission[] = [];
    const startOf = (ms: number) => t0 - (t0 % ms);
    expect((await store.consume(subject, QUOTA, NO_BANS, 10)).verdict).toBe('allowed');
    admitted.push({ atMs: t0, cost: 2 });
    for (let i = 0; i < 71; i++) expect((await store.consume(subject, QUOTA, NO_BANS, 1)).verdict).toBe('allowed');
    admitted.push({ atMs: t0, cost: 71 });
    const a = await ask(subject, { want: 10, holder: 'a' });
    clock.nowMs = t0 + L;
    await back(subject, a, 10);
    await store.settle(subject, QUOTA, NO_BANS, {
      id: 'r1',
      reserve: 10,
      cost: 2,
      minuteStartMs: startOf(60_000),
      dayStartMs: startOf(86_400_000),
      monthStartMs: 0,
    });
    const b = await ask(subject, { want: 10, holder: 'b' });
    expect(b.granted).toBe(10);
    clock.nowMs = t0 + 2 * L - 1;
    admitted.push({ atMs: clock.nowMs, cost: 10 });
    const direct = await fill(subject);
    admitted.push({ atMs: clock.nowMs, cost: direct });
    expect(10 + direct).toBeLessThanOrEqual(burst);
    expect(worstExcess(admitted, QUOTA)).toBeLessThanOrEqual(0);
  });

  it("a give-back is judged by the longest lease out, not its own replica's leaseMs (replicas with different leaseMs, as in a rolling config change)", async () => {
    const t0 = Date.UTC(2030, 0, 11, 9, 2, 0);
    const { clock, back, ask, fill } = blockStore(t0);
    const subject = 'mixed-lease-ms';
    // Replica a (leaseMs 200) takes a block on an empty bucket: from t0 + 200 ms.
    const a = await ask(subject, { want: 10, holder: 'a', leaseMs: 200 });
    expect(a.minuteTatUs).toBe(t0 * 1000 + 200_000 + 10 * T);
    // Replica b (leaseMs 1000, the new setting) takes one: charged from t0 + 1000 ms.
    const b = await ask(subject, { want: 10, holder: 'b', leaseMs: 1000 });
    expect(b.minuteTatUs).toBe(t0 * 1000 + 1_000_000 + 10 * T);
    // a gives its 10 back at once: its freed slots lie past now + 200 ms (a's leaseMs) but not
    // past b's lease's end, when b may still use its cells: the TAT stays. (Once, 10 T came off
    // and b's block with them, below its use: 609 > 600.)
    expect((await back(subject, a, 10)).minuteTatUs).toBe(b.minuteTatUs);
    clock.nowMs = t0 + 999;
    const direct = await fill(subject);
    const admitted = [
      { atMs: clock.nowMs, cost: 10 },
      { atMs: clock.nowMs, cost: direct },
    ];
    expect(10 + direct).toBeLessThanOrEqual(burst);
    expect(worstExcess(admitted, QUOTA)).toBeLessThanOrEqual(0);
  });

  it("a gcra block granted unreplicated and re-added after a failover charges its cells to the TAT again: its holder's use stays within GCRA's bound", async () => {
    const t0 = Date.UTC(2030, 0, 11, 9, 4, 0);
    const { clock, store, ask, fill } = blockStore(t0);
    const subject = 'lost-grant-readded';
    // p's block, replicated.
    const p = await ask(subject, { want: 10, holder: 'p' });
    expect(p.granted).toBe(10);
    const snapshot = await redis.client().dumpBuffer(quotaKey(subject));
    const holders = await redis.client().dumpBuffer(leaseHoldersKey(subject));
    // b's block: its WAIT timed out, so b was answered and uses it (redis-quota-store.ts reserve():
    // unreplicated, kept to be re-added); then the master dies and the replica without it is promoted.
    const b = await ask(subject, { want: 10, holder: 'b' });
    expect(b.granted).toBe(10);
    await redis.client().restore(quotaKey(subject), 0, snapshot, 'REPLACE');
    await redis.client().restore(leaseHoldersKey(subject), 0, holders, 'REPLACE');
    // The kept write re-added to the new master, as unreplicated-writes.ts does: its ledger
    // records the grant (units, no request, held by a block) and flushes it (reconcile).
    const ledger = new DegradedLedger(store, pino({ level: 'silent' }), 'added', true);
    ledger.record(subject, { verdict: 'allowed', nowMs: t0, cost: b.granted, bannedUntilMs: 0 }, QUOTA, 0, { spent: 0, leased: true });
    expect(await ledger.flush()).toBe(true);
    expect(Number(await redis.client().hget(quotaKey(subject), 'dc'))).toBe(20);
    // (Once, only the counts came back: 609 > 600 below.)
    expect(await tat(subject)).toBe(p.minuteTatUs + 10 * T);
    // p and b use their blocks as late as their leases allow; direct requests fill the bucket.
    clock.nowMs = t0 + 999;
    const direct = await fill(subject);
    // All within 1 ms: at most burst.
    expect(10 + 10 + direct).toBeLessThanOrEqual(burst);
  });

  it('a Redis restarted empty between a grant and its give-back: the give-back takes nothing off the new TAT and leaves no place', async () => {
    const t0 = Date.UTC(2030, 0, 11, 9, 6, 0);
    const { clock, ask, back } = blockStore(t0);
    const subject = 'restarted-empty';
    const old = await ask(subject, { want: 10, holder: 'a' });
    expect(old.granted).toBe(10);
    await redis.client().del(quotaKey(subject), leaseHoldersKey(subject));
    clock.nowMs = t0 + 10;
    // The same replica asks again on the empty Redis (its next number), and another one above it.
    const mine = await ask(subject, { want: 10, holder: 'a' });
    const other = await ask(subject, { want: 10, holder: 'b' });
    expect(other.minuteTatUs).toBe(mine.minuteTatUs + 10 * T);
    // The old block's give-back (its hash epoch is gone): nothing comes off.
    expect((await back(subject, old, 10)).minuteTatUs).toBe(other.minuteTatUs);
    expect((await places(subject)).length).toBe(2);
    await back(subject, other, 10);
    await back(subject, mine, 10);
    expect(await places(subject)).toEqual([]);
  });

  it('blocks of holders that never give back: their places are dropped once their ends pass (the hash stays bounded)', async () => {
    const t0 = Date.UTC(2030, 0, 11, 9, 8, 0);
    const { clock, ask } = blockStore(t0);
    const subject = 'killed-holders';
    let most = 0;
    // A new holder (a restarted pod) every 50 ms for 60 s, each takes one block and dies.
    for (let i = 0; i < 1200; i++) {
      await ask(subject, { want: 5, holder: `dead-${i}` });
      const kept = await places(subject);
      most = Math.max(most, kept.length);
      clock.nowMs += 50;
    }
    // At most the blocks whose ends are still ahead: a block holds at least one of the τ / T = burst
    // cells ahead (here the full bucket leaves ~2 per ask: ~300 places, each read by every grant).
    expect(most).toBeLessThanOrEqual(burst + 1);
    const ends = Object.entries(await redis.client().hgetall(leaseHoldersKey(subject))).filter(([f]) => f.startsWith('b:'));
    // (After the last grant: none whose end had passed at it.)
    for (const [, entry] of ends) expect(Number(entry.split(' ')[0])).toBeGreaterThan((clock.nowMs - 50) * 1000);
  });

  describe('random orders (fast-check)', () => {
    type Op =
      | { t: 'adv'; ms: number }
      | { t: 'ask'; h: number; want: number }
      | { t: 'use'; i: number; k: number; fill: boolean }
      | { t: 'back'; i: number; dup: boolean }
      | { t: 'direct'; n: number }
      | { t: 'fill' }
      | { t: 'late'; i: number };
    const op: fc.Arbitrary<Op> = fc.oneof(
      {
        arbitrary: fc.record({
          t: fc.constant('adv' as const),
          ms: fc.oneof(fc.integer({ min: 0, max: 60 }), fc.integer({ min: 60, max: 1000 })),
        }),
        weight: 4,
      },
      {
        arbitrary: fc.record({ t: fc.constant('ask' as const), h: fc.integer({ min: 0, max: 2 }), want: fc.integer({ min: 2, max: 30 }) }),
        weight: 4,
      },
      {
        arbitrary: fc.record({
          t: fc.constant('use' as const),
          i: fc.nat({ max: 3 }),
          k: fc.integer({ min: 1, max: 30 }),
          fill: fc.boolean(),
        }),
        weight: 4,
      },
      { arbitrary: fc.record({ t: fc.constant('back' as const), i: fc.nat({ max: 3 }), dup: fc.boolean() }), weight: 4 },
      { arbitrary: fc.record({ t: fc.constant('direct' as const), n: fc.integer({ min: 1, max: 60 }) }), weight: 2 },
      { arbitrary: fc.constant({ t: 'fill' as const }), weight: 1 },
      { arbitrary: fc.record({ t: fc.constant('late' as const), i: fc.nat({ max: 3 }) }), weight: 2 },
    );
    let run = 0;

    it("blocks of three holders, used or not, given back in any order (retries too): GCRA's bound holds, retries credit nothing, no block's place is left", async () => {
      const L = 200;
      await fc.assert(
        fc.asyncProperty(fc.array(op, { minLength: 10, maxLength: 80 }), async (ops) => {
          run++;
          const t0 = Date.UTC(2030, 0, 12, 0, 0, 0) + run * 120_000;
          const { clock, store, ask, backRequest, reserve, fill } = blockStore(t0);
          const subject = `any-order-${run}`;
          const perMs = new Map<number, number>();
          const admit = (cost: number) => cost > 0 && perMs.set(clock.nowMs, (perMs.get(clock.nowMs) ?? 0) + cost);
          const out: Array<HeldBlock & { used: number; grantMs: number }> = [];
          const giveBack = async (i: number, dup: boolean) => {
            const [block] = out.splice(i, 1);
            const request = backRequest(block!, block!.granted - block!.used);
            const first = await reserve(subject, request);
            if (dup) {
              // The same give-back again (its reply lost): it credits nothing the second time.
              const again = await reserve(subject, request);
              // (A TAT at or before now reads as 0: the same.)
              const nowUs = clock.nowMs * 1000;
              expect(Math.max(again.minuteTatUs, nowUs)).toBe(Math.max(first.minuteTatUs, nowUs));
              expect(again.dayCount).toBe(first.dayCount);
            }
          };
          for (const o of ops) {
            if (o.t === 'adv') clock.nowMs += o.ms;
            else if (o.t === 'ask') {
              const block = await ask(subject, { want: o.want, holder: `h${o.h}`, leaseMs: L });
              if (block.granted > 0) out.push({ ...block, used: 0, grantMs: clock.nowMs });
            } else if (o.t === 'use' && out.length > 0) {
              const block = out[o.i % out.length]!;
              // A lease admits before its grant's time + leaseMs (rules 4 and 8).
              if (clock.nowMs < block.grantMs + block.leaseMs) {
                const k = Math.min(o.k, block.granted - block.used);
                block.used += k;
                admit(k);
                // Then the bucket filled at that moment: what the TAT left for others.
                if (o.fill) admit(await fill(subject));
              }
            } else if (o.t === 'back' && out.length > 0) await giveBack(o.i % out.length, o.dup);
            else if (o.t === 'late') {
              // The adversary: a block still in its lease used whole at its lease's last moment, then the bucket filled.
              const live = out.filter((b) => clock.nowMs < b.grantMs + b.leaseMs);
              if (live.length > 0) {
                const block = live[o.i % live.length]!;
                clock.nowMs = block.grantMs + block.leaseMs - 1;
                admit(block.granted - block.used);
                block.used = block.granted;
                admit(await fill(subject));
              }
            } else if (o.t === 'direct') {
              for (let n = 0; n < o.n; n++) if ((await store.consume(subject, QUOTA, NO_BANS, 1)).verdict === 'allowed') admit(1);
            } else if (o.t === 'fill') admit(await fill(subject));
          }
          while (out.length > 0) await giveBack(out.length - 1, false);
          admit(await fill(subject));
          const admitted = [...perMs].map(([atMs, cost]) => ({ atMs, cost }));
          expect(worstExcess(admitted, QUOTA)).toBeLessThanOrEqual(0);
          expect(await places(subject)).toEqual([]);
        }),
        { numRuns: 300 },
      );
    });
  });
});
