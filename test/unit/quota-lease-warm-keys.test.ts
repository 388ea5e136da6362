import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Quota } from '../../src/config/plans-schema.js';
import { QuotaLeases, RECALL_GRACE_MS, type LeaseSettings } from '../../src/quota/quota-leases.js';
import { MINUTE, NO_BANS, QUOTA, scriptedStore, SETTINGS } from '../helpers/scripted-lease-store.js';

// Warm keys (rule 15 of src/quota/quota-leases.ts): a key below hotPerSecond that calls steadily
// takes a fixed-window lease living until its minute's end, sized for its rate, on a replica whose
// store is a script of replies and whose two clocks (monotonic and wall) the test moves.

const settle = () => new Promise((resolve) => setImmediate(resolve));

const WARM: LeaseSettings = { ...SETTINGS, hotPerSecond: 50, maxBlock: 2000, warmKeys: true };
const GCRA: Quota = { perMinute: 6000, perDay: 1_000_000, algorithm: 'gcra', burst: 1000 };

/** A replica whose monotonic clock starts at 100 s and whose wall clock is then `wallAtStart`. */
function replica(settings: LeaseSettings = WARM, wallAtStart = MINUTE + 5_000) {
  const { store, asks, hooks } = scriptedStore();
  const clock = { nowMs: 100_000 };
  const leases = new QuotaLeases(
    store,
    settings,
    () => clock.nowMs,
    () => wallAtStart + (clock.nowMs - 100_000),
  );
  /** `count` requests of 'k', `everyMs` apart (the first now): what admit answered to each. */
  const calls = (count: number, everyMs: number, quota: Quota = QUOTA) => {
    const answers: unknown[] = [];
    for (let i = 0; i < count; i++) {
      if (i > 0) clock.nowMs += everyMs;
      answers.push(leases.admit('k', quota, NO_BANS, 1));
    }
    return answers;
  };
  return { leases, asks, hooks, clock, calls };
}

describe('warm keys (rule 15)', () => {
  // Each key's place in the minute's edges (WARM_EDGE_SPREAD_MS), drawn with Math.random: 0 here
  // (its leases start at once and end 3 s before the minute's end) unless a test says otherwise.
  beforeEach(() => vi.spyOn(Math, 'random').mockReturnValue(0));
  afterEach(() => vi.restoreAllMocks());

  it('a steady key below hotPerSecond asks, after 5 s of history, for a lease until its minute ends, sized for its rate', async () => {
    const { leases, asks, clock, calls } = replica();
    // Five a second: far below hotPerSecond (50). Under 5 s seen: no ask yet.
    expect(calls(25, 200).every((answer) => answer === undefined)).toBe(true);
    expect(asks).toHaveLength(0);
    clock.nowMs += 200;
    expect(leases.admit('k', QUOTA, NO_BANS, 1)).toBeUndefined();
    expect(asks).toHaveLength(1);
    // 5 a second (26 requests 5 s apart from the first), 50 s of the minute left on the wall clock,
    // less the 3 s its lease ends before the minute's: 235 units, 'le' 47 s after the grant.
    expect(asks[0]!.request).toMatchObject({ want: 235, leaseMs: 47_000, divisor: 1, minBlock: 2 });
    asks[0]!.answer({ granted: 235, minuteCount: 261, dayCount: 261, seq: 4, nowMs: MINUTE + 10_000 });
    await settle();
    expect(leases.held('k')).toBe(235);
    // Far past leaseMs (1 s), still before the minute's end: admitted from the lease, no ask.
    clock.nowMs += 40_000;
    // Redis's count (261) less the lease's unused units (234): the 27 admitted.
    expect(leases.admit('k', QUOTA, NO_BANS, 1)).toMatchObject({ verdict: 'allowed', minuteCount: 27 });
    expect(asks).toHaveLength(1);
    // Its life's end (less the margins for the two clocks) ends it: its units go back, and the
    // give-back names the end Redis keeps for this holder, the grant's time plus its life.
    clock.nowMs += 6_990;
    expect(leases.held('k')).toBe(234);
    expect(leases.admit('k', QUOTA, NO_BANS, 1)).toBeUndefined();
    expect(leases.held('k')).toBe(0);
    await settle();
    const back = asks.find(({ request }) => request.giveBack > 0)!.request;
    expect(back).toMatchObject({ giveBack: 234, ends: true, heldUntilMs: MINUTE + 57_000, leaseMs: 47_000 });
  });

  it('a few requests in a row are no steady key: no warm lease', () => {
    const { asks, clock, calls } = replica();
    // Four at once, then a fifth 6 s later: 5 s of history but 4 units in it, fewer than 8.
    calls(4, 10);
    clock.nowMs += 6_000;
    calls(1, 0);
    expect(asks).toHaveLength(0);
  });

  it('a hot key asks as before: a block for its rate over leaseMs', () => {
    const { asks, calls } = replica();
    calls(50, 10);
    expect(asks).toHaveLength(1);
    expect(asks[0]!.request).toMatchObject({ leaseMs: SETTINGS.leaseMs, want: 50 });
  });

  it('asks for no warm lease when off, for gcra plans, with too few units for a block, or near the minute end', () => {
    const asked = (settings: LeaseSettings, wallAtStart: number, everyMs: number, quota: Quota = QUOTA) => {
      const { asks, calls } = replica(settings, wallAtStart);
      calls(Math.ceil(6_000 / everyMs) + 1, everyMs, quota);
      return asks.length;
    };
    expect(asked(WARM, MINUTE + 5_000, 200)).toBe(1);
    expect(asked({ ...WARM, warmKeys: false }, MINUTE + 5_000, 200)).toBe(0);
    expect(asked(WARM, MINUTE + 5_000, 200, GCRA)).toBe(0);
    // Under 5 s of life left (the minute's end less 3 s) once the history is long enough: not worth a
    // grant and a give-back.
    expect(asked(WARM, MINUTE + 47_500, 50)).toBe(0);
    expect(asked(WARM, MINUTE + 46_500, 50)).toBe(1);
    // One unit every 9 s: never 8 units in 10 s.
    expect(asked({ ...WARM, minBlock: 60 }, MINUTE + 5_000, 9_000)).toBe(0);
  });

  it('a key calling every second or so keeps its rate between calls and gets a lease; a slower one is left to Redis', () => {
    const slow = replica({ ...WARM, minBlock: 8 });
    // One call every 2.5 s: 0.4 a second, about 20 units in the minute's rest: fewer than a warm
    // lease's first block (32), which would cost more in grant and give-back than its decisions.
    slow.calls(12, 2_500);
    expect(slow.asks).toHaveLength(0);
    const steady = replica({ ...WARM, minBlock: 8 });
    // One every 0.6 s (each call past 2 s after the one before would drop the last second's rate
    // from a hot key's count, not from the warm one): 1.7 a second, about 77 in the rest.
    steady.calls(12, 600);
    expect(steady.asks).toHaveLength(1);
    expect(steady.asks[0]!.request.want).toBeGreaterThanOrEqual(32);
  });

  it("a warm lease's renewal asks for the rest of the minute again", async () => {
    const { asks, clock, calls } = replica();
    calls(26, 200);
    asks[0]!.answer({ granted: 10, minuteCount: 36, dayCount: 36, seq: 4, nowMs: MINUTE + 10_000 });
    await settle();
    // Half of the block used, still calling: a renewal, with the life left on the wall clock.
    clock.nowMs += 200;
    calls(6, 200);
    expect(asks).toHaveLength(2);
    expect(asks[1]!.request.leaseMs).toBe(60_000 - 11_200 - 3_000);
  });

  it("spreads the keys' warm leases over the minute's edges: none asked before its place, each ending its rest before the end", async () => {
    vi.spyOn(Math, 'random').mockReturnValue(0.5);
    // History from 6 s before the minute: this key's leases start 1.5 s into it and end 1.5 s
    // before its end; none in the last 5 s of life of the minute before, and still no ask at 1.4 s.
    const { asks, clock, calls } = replica(WARM, MINUTE - 6_000);
    calls(38, 200);
    expect(asks).toHaveLength(0);
    clock.nowMs += 200;
    calls(1, 0);
    expect(asks).toHaveLength(1);
    expect(asks[0]!.request.leaseMs).toBe(60_000 - 1_600 - 1_500);
  });

  it("a recalled request waits no longer than leaseMs and the grace for a warm lease's holder that cannot answer", async () => {
    const { leases } = replica();
    const startedMs = performance.now();
    // 'le' 50 s away: a killed holder would have held the request that long.
    await leases.recalled('k', { seq: 6, leasedUntilMs: MINUTE + 55_000, nowMs: MINUTE + 5_000 });
    const waitedMs = performance.now() - startedMs;
    expect(waitedMs).toBeGreaterThanOrEqual(SETTINGS.leaseMs + RECALL_GRACE_MS - 5);
    expect(waitedMs).toBeLessThan(10_000);
  });
});
