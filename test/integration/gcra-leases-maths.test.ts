import { describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { gcraMinute } from '../../src/quota/gcra.js';
import { QuotaLeases, type LeaseSettings } from '../../src/quota/quota-leases.js';
import type { QuotaOutcome } from '../../src/quota/quota-state.js';
import { windowsOf } from '../../src/quota/rate-limit-headers.js';
import type { LeaseGrant, LeaseRequest } from '../../src/store/quota-store.js';
import { leaseHoldersKey, quotaKey } from '../../src/store/redis/redis-keys.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { random } from '../helpers/random.js';
import { gcraBlockStore } from '../helpers/gcra-blocks.js';
import { redisForFile } from '../helpers/redis-for-file.js';

// gcra leases (src/quota/quota-leases.ts, rules 7 to 9) on a real redis-server and one injected
// clock (Redis's and the replicas'): three replicas with their own leases send one gcra key's
// requests, in storms far above its rate and calms below it, one of them in clumps so that its
// leases are used late in their life. Every admitted unit is filed at the clock's moment when it
// was admitted. GCRA's promise, checked over every span [a, b] between two admissions: at most
// burst + ⌊(b − a) / T⌋ units, hence at most `limit` in any 60 s.

const redis = redisForFile();

const NO_BANS: BanPolicy = { afterRejections: 1_000_000, window: 60, duration: 60 };
const SETTINGS: LeaseSettings = { leaseMs: 200, hotPerSecond: 2, minBlock: 2, maxBlock: 40, spread: 2, replicas: 3 };
/** T = 24,990 µs (40 units/s), τ = 600 T ≈ 15 s: room for blocks (rule 7). */
const QUOTA: Quota = { perMinute: 3000, perDay: 10_000_000, algorithm: 'gcra', burst: 600 };
/** T = 20,683 µs (48 units/s), τ = 100 T ≈ 2 s: a storm fills the bucket in well under a second, a calm empties it. */
const SMALL_BURST: Quota = { perMinute: 3000, perDay: 10_000_000, algorithm: 'gcra', burst: 100 };

interface Admission {
  atMs: number;
  cost: number;
}

interface Run {
  admitted: Admission[];
  /** Requests and units admitted on a lease. */
  leased: number;
  leasedUnits: number;
  /** Requests admitted on a lease by replica 2 (the clumped one). */
  leasedLate: number;
  reservations: number;
  /** Clock of each grant, and the units granted in all. */
  grants: number[];
  grantedUnits: number;
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

async function hammer(opts: {
  seed: number;
  startMs: number;
  durationMs: number;
  quota: Quota;
  subject: string;
  /** Mean gap between requests at `atMs` since the start. */
  gapMs: (sinceStartMs: number) => number;
  /**
   * Replica 2 takes every request in 40 ms of each 150 ms, and none besides: a block it gets in one
   * clump waits 110 ms and is used in the next, late in its life (it ends 190 ms after its grant).
   */
  clumps: boolean;
  /** As the gateway does (enforce-quota.ts): a refusal by Redis ends that replica's lease. */
  endOnRefusal: boolean;
}): Promise<Run> {
  const next = random(opts.seed);
  const clock = { nowMs: opts.startMs };
  const run: Run = { admitted: [], leased: 0, leasedUnits: 0, leasedLate: 0, reservations: 0, grants: [], grantedUnits: 0 };
  const window = gcraMinute(opts.quota);
  const replicas = [0, 1, 2].map(() => {
    const store = new RedisQuotaStore(redis.client(), () => clock.nowMs);
    const counted = {
      reserve: async (id: string, quota: Quota, ban: BanPolicy, request: LeaseRequest): Promise<LeaseGrant> => {
        if (request.want > 0) run.reservations++;
        const grant = await store.reserve(id, quota, ban, request);
        if (grant.granted > 0) {
          run.grants.push(grant.nowMs);
          run.grantedUnits += grant.granted;
        }
        return grant;
      },
    };
    return { store, leases: new QuotaLeases(counted, SETTINGS, () => clock.nowMs) };
  });
  try {
    for (let step = 0; clock.nowMs < opts.startMs + opts.durationMs; step++) {
      clock.nowMs += Math.floor(next() * 2 * opts.gapMs(clock.nowMs - opts.startMs));
      const pick = next();
      const clump = clock.nowMs % 150 < 40;
      const replica = opts.clumps ? (clump ? 2 : Math.floor(pick * 2)) : Math.floor(pick * 3);
      const { store, leases } = replicas[replica]!;
      const cost = next() < 0.2 ? 3 : 1;
      let outcome: QuotaOutcome | undefined = await leases.admit(opts.subject, opts.quota, NO_BANS, cost);
      if (outcome) {
        run.leased++;
        run.leasedUnits += cost;
        if (replica === 2) run.leasedLate++;
        // Headers on a lease: sane, never more than the burst.
        const [minute] = windowsOf(opts.quota, outcome).filter((w) => w.name === 'minute');
        expect(minute!.remaining).toBeGreaterThanOrEqual(0);
        expect(minute!.remaining).toBeLessThanOrEqual(window.burst);
      } else {
        outcome = await store.consume(opts.subject, opts.quota, NO_BANS, cost);
        if (outcome.verdict !== 'allowed' && opts.endOnRefusal) leases.refused(opts.subject);
      }
      if (outcome.verdict === 'allowed') run.admitted.push({ atMs: clock.nowMs, cost });
      if (step % 4 === 0) await settle();
    }
  } finally {
    await Promise.all(replicas.map((r) => r.leases.close()));
  }
  return run;
}

/**
 * The largest excess over GCRA's bound of any span [a, b] between two admissions: units in it
 * less (burst + ⌊(b − a) / T⌋); and the most units in any span shorter than 60 s.
 */
function worstSpans(run: Run, quota: Quota): { excess: number; most60s: number } {
  const { burst, intervalUs } = gcraMinute(quota);
  const at = run.admitted;
  let excess = -Infinity;
  let most60s = 0;
  for (let i = 0; i < at.length; i++) {
    let units = 0;
    for (let j = i; j < at.length; j++) {
      units += at[j]!.cost;
      const spanMs = at[j]!.atMs - at[i]!.atMs;
      excess = Math.max(excess, units - (burst + Math.floor((spanMs * 1000) / intervalUs)));
      if (spanMs < 60_000) most60s = Math.max(most60s, units);
    }
  }
  return { excess, most60s };
}

const sum = (admitted: Admission[]) => admitted.reduce((n, a) => n + a.cost, 0);

/** A store on the test's own clock, asked for blocks of QUOTA directly. */
const blockStore = (startMs: number) => gcraBlockStore(redis.client(), QUOTA, NO_BANS, startMs);

describe('gcra leases on one injected clock', { timeout: 120_000 }, () => {
  it('never admit more than GCRA allows in any span, through storms and calms, with leases used late', async () => {
    const startMs = Date.UTC(2030, 0, 10, 12, 0, 7);
    // 3 s storms (a request each 6 ms on average, 1.4 units: ~5x the rate) that fill the bucket,
    // then 5 s calms (each 60 ms: ~0.5x) that empty it with leases out, for 120 s: each storm
    // starts on leases granted in the calm, some of them used late.
    const run = await hammer({
      seed: 7,
      startMs,
      durationMs: 120_000,
      quota: SMALL_BURST,
      subject: 'gcra-spans',
      gapMs: (sinceMs) => (sinceMs % 8000 < 3000 ? 6 : 60),
      clumps: true,
      endOnRefusal: false,
    });
    const { excess, most60s } = worstSpans(run, SMALL_BURST);
    expect(excess).toBeLessThanOrEqual(0);
    expect(most60s).toBeLessThanOrEqual(SMALL_BURST.perMinute);
    // Leases were granted and used throughout, also by the clumped replica, and the bucket was
    // driven full (the promise was at stake).
    expect(run.grants.length).toBeGreaterThan(400);
    expect(run.leased).toBeGreaterThan(500);
    expect(run.leasedLate).toBeGreaterThan(100);
    expect(most60s).toBeGreaterThan(SMALL_BURST.perMinute * 0.8);
  });

  it('a block used as late as its lease allows, as a storm begins, lets nothing through early', async () => {
    // The hazard of a lease (docs/quota-leases.md): on an empty bucket, one replica takes a block
    // and uses it all just before its lease ends, as the others start a storm that fills the
    // bucket. Had its cells been charged at the grant, the span from that late use to the full
    // bucket would hold ⌊(late − grant) / T⌋ units too many.
    const next = random(11);
    const clock = { nowMs: Date.UTC(2030, 0, 10, 12, 9, 30) };
    const settings: LeaseSettings = { leaseMs: 200, hotPerSecond: 2, minBlock: 20, maxBlock: 40, spread: 1, replicas: 3 };
    const run: Run = { admitted: [], leased: 0, leasedUnits: 0, leasedLate: 0, reservations: 0, grants: [], grantedUnits: 0 };
    const replicas = [0, 1, 2].map(() => {
      const store = new RedisQuotaStore(redis.client(), () => clock.nowMs);
      // The maths alone: no lease notices (whose first subscription would end a lease granted before it).
      return { store, leases: new QuotaLeases({ reserve: store.reserve.bind(store) }, settings, () => clock.nowMs) };
    });
    const send = async (replica: number) => {
      const { store, leases } = replicas[replica]!;
      let outcome = await leases.admit('gcra-late', SMALL_BURST, NO_BANS, 1);
      if (outcome) {
        run.leased++;
        if (replica === 0) run.leasedLate++;
      } else outcome = await store.consume('gcra-late', SMALL_BURST, NO_BANS, 1);
      if (outcome.verdict === 'allowed') run.admitted.push({ atMs: clock.nowMs, cost: 1 });
    };
    try {
      for (let cycle = 0; cycle < 12; cycle++) {
        // Replica 0 turns hot on an empty bucket and gets a block.
        for (let i = 0; i < 3; i++) await send(0);
        while (replicas[0]!.leases.held('gcra-late') === 0) await settle();
        // Then nothing, until just before its lease ends: it uses all of it, as the storm starts.
        clock.nowMs += 150 + Math.floor(next() * 35);
        // (Its renewal, asked for on the way, arrives a turn later: used too, at the same moment.)
        for (let turn = 0; turn < 4; turn++) {
          while (replicas[0]!.leases.held('gcra-late') > 0) await send(0);
          await settle();
        }
        for (let i = 0; i < 1500; i++) {
          await send(1 + (i % 2));
          clock.nowMs += Math.floor(next() * 4);
          if (i % 4 === 0) await settle();
        }
        // Silence until the bucket is empty and every lease has ended.
        clock.nowMs += 4000;
        await settle();
      }
    } finally {
      await Promise.all(replicas.map((r) => r.leases.close()));
    }
    const { excess } = worstSpans(run, SMALL_BURST);
    expect(excess).toBeLessThanOrEqual(0);
    // Every cycle's late block was used: 12 blocks of at least minBlock.
    expect(run.leasedLate).toBeGreaterThanOrEqual(12 * settings.minBlock);
  });

  it('under sustained overload admit what GCRA allows, less the cells leased and not used', async () => {
    const startMs = Date.UTC(2030, 0, 10, 12, 3, 0);
    const durationMs = 90_000;
    // A steady storm, ~5x the rate, from an empty bucket.
    const run = await hammer({
      seed: 8,
      startMs,
      durationMs,
      quota: QUOTA,
      subject: 'gcra-overload',
      gapMs: () => 6,
      clumps: false,
      endOnRefusal: true,
    });
    const { burst, intervalUs } = gcraMinute(QUOTA);
    // Exact GCRA admits at most burst + ⌊D / T⌋ over D. Leases lose the cells granted and not
    // used, the leaseMs a replica's first grant skips ahead (⌈leaseMs / T⌉ cells) and, per
    // replica, a request's worth (3) of freed cells not yet taken when the run stops.
    const allowed = burst + Math.floor((durationMs * 1000) / intervalUs);
    const unusedCells = run.grantedUnits - run.leasedUnits;
    const lossBound = unusedCells + SETTINGS.replicas * (Math.ceil((SETTINGS.leaseMs * 1000) / intervalUs) + 3);
    const admitted = sum(run.admitted);
    expect(admitted).toBeLessThanOrEqual(allowed);
    expect(admitted).toBeGreaterThanOrEqual(allowed - lossBound);
    expect(run.leased).toBeGreaterThan(100);
    // Once the bucket is full no block is granted (rule 7): the last minute is Redis's alone,
    // and admits GCRA's sustained rate, one unit per T, less at most a request's worth.
    const lastMinuteMs = startMs + durationMs - 60_000;
    expect(run.grants.filter((atMs) => atMs >= lastMinuteMs)).toEqual([]);
    const inLastMinute = sum(run.admitted.filter((a) => a.atMs >= lastMinuteMs));
    expect(inLastMinute).toBeGreaterThanOrEqual(Math.floor(60_000_000 / intervalUs) - 3);
    expect(worstSpans(run, QUOTA).excess).toBeLessThanOrEqual(0);
  });

  it('a plan whose tolerance cannot hold a block asks for no lease', async () => {
    const quota: Quota = { perMinute: 3000, perDay: 10_000_000, algorithm: 'gcra' };
    const run = await hammer({
      seed: 9,
      startMs: Date.UTC(2030, 0, 10, 12, 6, 0),
      durationMs: 5_000,
      quota,
      subject: 'gcra-burst-one',
      gapMs: () => 6,
      clumps: false,
      endOnRefusal: true,
    });
    expect(run.reservations).toBe(0);
    expect(run.leased).toBe(0);
    expect(worstSpans(run, quota).excess).toBeLessThanOrEqual(0);
  });

  it('gives back unused cells only while nothing was charged after them', async () => {
    const { clock, store, ask: reserve, back } = blockStore(Date.UTC(2030, 0, 10, 12, 9, 0));
    const { intervalUs } = gcraMinute(QUOTA);
    const nowUs = clock.nowMs * 1000;
    // Charged as arriving leaseMs from now.
    const grant = await reserve('gcra-back', { want: 10 });
    expect(grant).toMatchObject({ granted: 10, minuteTatUs: nowUs + 1_000_000 + 10 * intervalUs, dayCount: 10 });
    // Nothing charged since: the top 4 slots come off.
    expect(await back('gcra-back', grant, 4)).toMatchObject({ minuteTatUs: nowUs + 1_000_000 + 6 * intervalUs, dayCount: 6 });
    // A request charged after the block, while the freed slots all lie after now + leaseMs: every
    // cell charged after them moves down onto slots still after its use, so the TAT comes down.
    const other = await reserve('gcra-above', { want: 10 });
    expect((await store.consume('gcra-above', QUOTA, NO_BANS, 1)).verdict).toBe('allowed');
    expect(await back('gcra-above', other, 4)).toMatchObject({ minuteTatUs: other.minuteTatUs + intervalUs - 4 * intervalUs, dayCount: 7 });
    // Once they do not (time has come within leaseMs of them), the TAT stays; the day is credited.
    const late = await reserve('gcra-behind', { want: 10 });
    expect((await store.consume('gcra-behind', QUOTA, NO_BANS, 1)).verdict).toBe('allowed');
    clock.nowMs += Math.ceil((6 * intervalUs) / 1000) + 1;
    expect(await back('gcra-behind', late, 4)).toMatchObject({ minuteTatUs: late.minuteTatUs + intervalUs, dayCount: 7 });
    clock.nowMs -= Math.ceil((6 * intervalUs) / 1000) + 1;
    // Two holders' blocks, one above the other, come back oldest first (a recall ends both at
    // once): the lower one's give-back moves the upper one down, which must not cost the upper
    // one its credit (its cells were lost until real time passed them: a burst on a gcra key
    // was under-admitted by a block's worth).
    const lower = await reserve('gcra-two', { want: 10, holder: 'a' });
    const upper = await reserve('gcra-two', { want: 10, holder: 'b' });
    expect(upper.minuteTatUs).toBe(lower.minuteTatUs + 10 * intervalUs);
    expect(await back('gcra-two', lower, 4)).toMatchObject({ minuteTatUs: upper.minuteTatUs - 4 * intervalUs, dayCount: 16 });
    expect(await back('gcra-two', upper, 10)).toMatchObject({ minuteTatUs: upper.minuteTatUs - 14 * intervalUs, dayCount: 6 });
    // Moved down by a give-back (the upper block now ends 10 T lower, 6 T past now + leaseMs once
    // its 4 go): with a cell charged above it, a credit while its freed slots lie after
    // now + leaseMs, and none once time has come within leaseMs of them.
    const credited = async (laterMs: number) => {
      const subject = `gcra-late-${laterMs}`;
      const low = await reserve(subject, { want: 10, holder: 'a' });
      const high = await reserve(subject, { want: 10, holder: 'b' });
      expect((await store.consume(subject, QUOTA, NO_BANS, 1)).verdict).toBe('allowed');
      await back(subject, low, 10);
      clock.nowMs += laterMs;
      const { minuteTatUs } = await back(subject, high, 4);
      clock.nowMs -= laterMs;
      return (high.minuteTatUs + intervalUs - 10 * intervalUs - minuteTatUs) / intervalUs;
    };
    expect(await credited(Math.floor((6 * intervalUs) / 1000) - 1)).toBe(4);
    expect(await credited(Math.ceil((6 * intervalUs) / 1000) + 1)).toBe(0);
    // The last cell must conform at the grant: nothing more than τ − leaseMs allows.
    const { burst } = gcraMinute(QUOTA);
    const most = Math.floor((burst * intervalUs - 1_000_000) / intervalUs);
    expect((await reserve('gcra-room', { want: 100_000 })).granted).toBe(most);
    expect((await reserve('gcra-room', { want: 1 })).granted).toBe(0);
  });
  describe('blocks given back in any order', () => {
    const { intervalUs } = gcraMinute(QUOTA);
    const setup = (startMs: number) => {
      const { clock, store, ask: reserve, back } = blockStore(startMs);
      return { clock, store, reserve, back };
    };

    it("one replica's own blocks, given back newest first (quota-leases.ts end()), are both credited", async () => {
      const { reserve, back } = setup(Date.UTC(2030, 0, 10, 12, 12, 0));
      const older = await reserve('gs-own', { want: 10, holder: 'a' });
      const newer = await reserve('gs-own', { want: 10, holder: 'a' });
      expect(newer.minuteTatUs).toBe(older.minuteTatUs + 10 * intervalUs);
      // The newer block, unused, comes off: the TAT is the older block's end again, nothing above it.
      expect((await back('gs-own', newer, 10)).minuteTatUs).toBe(older.minuteTatUs);
      // The older block's 4 unused cells are its top slots and nothing is charged above them. (A
      // block above it coming back does not move it: once, its end was judged moved, and they were lost.)
      expect((await back('gs-own', older, 4)).minuteTatUs).toBe(older.minuteTatUs - 4 * intervalUs);
    });

    it('a block whose grant the store lost (failover to a replica without it) credits nothing to the TAT', async () => {
      const t0 = Date.UTC(2030, 0, 10, 12, 14, 0);
      const { clock, store, reserve, back } = setup(t0);
      const subject = 'gs-lost';
      const { burst } = gcraMinute(QUOTA);
      // A block out on replica p ('he' set, replicated).
      const kept = await reserve(subject, { want: 10, holder: 'p' });
      const snapshot = await redis.client().dumpBuffer(quotaKey(subject));
      const holders = await redis.client().dumpBuffer(leaseHoldersKey(subject));
      // Replica b's block, granted on a master that dies before replicating it; the promoted replica
      // holds the state as before the grant (same 'he', same 'gs').
      const lost = await reserve(subject, { want: 10, holder: 'b' });
      expect(lost.minuteTatUs).toBe(kept.minuteTatUs + 10 * intervalUs);
      await redis.client().restore(quotaKey(subject), 0, snapshot, 'REPLACE');
      await redis.client().restore(leaseHoldersKey(subject), 0, holders, 'REPLACE');
      // p uses its 10 cells as late as its lease allows; b's lease ends (lost subscription) and its
      // 10 unused cells come back to the new master, whose TAT never held them.
      clock.nowMs = t0 + 999;
      const after = await back(subject, lost, 10);
      // This master knows no such block: nothing comes off the TAT (once, 10 T came off p's slots).
      expect(after.minuteTatUs).toBe(kept.minuteTatUs);
      let direct = 0;
      while ((await store.consume(subject, QUOTA, NO_BANS, 1)).verdict === 'allowed') direct++;
      // p's 10 and these, all within 1 ms: at most burst (GCRA's promise for a span under T).
      expect(10 + direct).toBeLessThanOrEqual(burst);
    });

    it("a lost block is never taken for the same replica's next one, though Redis gives that one the same seq", async () => {
      const t0 = Date.UTC(2030, 0, 10, 12, 16, 0);
      const { clock, store, reserve, back } = setup(t0);
      const subject = 'gs-again';
      const { burst } = gcraMinute(QUOTA);
      await reserve(subject, { want: 10, holder: 'p' });
      const snapshot = await redis.client().dumpBuffer(quotaKey(subject));
      const holders = await redis.client().dumpBuffer(leaseHoldersKey(subject));
      // Replica b's block is lost with its master; the promoted replica's clock is behind (here:
      // the same moment), so b's next block gets the lost one's seq and its end: only b's own
      // number for each tells them apart.
      const lost = await reserve(subject, { want: 10, holder: 'b' });
      await redis.client().restore(quotaKey(subject), 0, snapshot, 'REPLACE');
      await redis.client().restore(leaseHoldersKey(subject), 0, holders, 'REPLACE');
      const again = await reserve(subject, { want: 10, holder: 'b' });
      expect({ seq: again.seq, end: again.minuteTatUs }).toEqual({ seq: lost.seq, end: lost.minuteTatUs });
      clock.nowMs = t0 + 999;
      // The lost block's 10 come back: this master never charged them, nothing comes off.
      expect((await back(subject, lost, 10)).minuteTatUs).toBe(again.minuteTatUs);
      // The live block still has its place: 4 of its cells come back (nothing charged above them).
      expect((await back(subject, again, 4)).minuteTatUs).toBe(again.minuteTatUs - 4 * intervalUs);
      let direct = 0;
      while ((await store.consume(subject, QUOTA, NO_BANS, 1)).verdict === 'allowed') direct++;
      // p's 10 and b's 6 used, and these, all within 1 ms: at most burst.
      expect(10 + 6 + direct).toBeLessThanOrEqual(burst);
      expect(10 + 6 + direct).toBeGreaterThan(burst - 2);
    });

    it('a used-up block leaves nothing behind in Redis: its give-back removes its place', async () => {
      const { reserve, back } = setup(Date.UTC(2030, 0, 10, 12, 18, 0));
      const subject = 'gs-used';
      const block = await reserve(subject, { want: 10, holder: 'p' });
      const places = async () => (await redis.client().hkeys(leaseHoldersKey(subject))).filter((f) => f.startsWith('b:'));
      expect(await places()).toHaveLength(1);
      await back(subject, block, 0);
      expect(await places()).toEqual([]);
    });
  });

  it("a settled reservation's refund takes nothing off the TAT while a lease is out, and does once none is", async () => {
    const t0 = Date.UTC(2030, 0, 10, 12, 20, 0);
    const { clock, store, ask, back } = blockStore(t0);
    const { intervalUs } = gcraMinute(QUOTA);
    const subject = 'gcra-settle';
    const tat = async () => Number(await redis.client().hget(quotaKey(subject), 'mt'));
    const reservation = async (id: string) => {
      const outcome = await store.consume(subject, QUOTA, NO_BANS, 10);
      expect(outcome.verdict).toBe('allowed');
      const startOf = (ms: number) => clock.nowMs - (clock.nowMs % ms);
      return {
        id,
        reserve: 10,
        cost: 2,
        minuteStartMs: startOf(60_000),
        dayStartMs: startOf(86_400_000),
        monthStartMs: 0,
        tatUs: outcome.minuteTatUs,
        admittedAtMs: outcome.nowMs,
        admittedMoveNo: outcome.moveNo,
      };
    };
    const first = await reservation('s1');
    // A block granted above the reservation's cells: moving them down would move its slots below their use.
    const block = await ask(subject, { want: 10, holder: 'p' });
    expect(await tat()).toBe(block.minuteTatUs);
    expect((await store.settle(subject, QUOTA, NO_BANS, first)).applied).toBe(true);
    expect(await tat()).toBe(block.minuteTatUs);
    // The lease ends (its block used up); a later reservation's refund comes off the TAT again.
    await back(subject, block, 0);
    clock.nowMs += 1001;
    const second = await reservation('s2');
    const before = await tat();
    await store.settle(subject, QUOTA, NO_BANS, second);
    expect(await tat()).toBe(before - 8 * intervalUs);
  });
});
