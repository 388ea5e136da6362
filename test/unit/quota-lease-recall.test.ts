import { describe, expect, it } from 'vitest';
import { QuotaLeases, RECALL_GRACE_MS } from '../../src/quota/quota-leases.js';
import { MINUTE, NO_BANS, notice, QUOTA, scriptedStore, SETTINGS } from '../helpers/scripted-lease-store.js';

// Recall (rule 11 of src/quota/quota-leases.ts), on a replica whose store is a script of replies:
// a recall ends the lease and gives its units back; a recalled request waits for the notice that
// no lease is left, newer than its recall, or for its bound; a request waits for its replica's own
// ask instead of going to Redis beside it.

const settle = () => new Promise((resolve) => setImmediate(resolve));

// A cell of 10 ms, and a burst leases may take blocks of (quota-leases.ts, gcra plans).
const GCRA = { perMinute: 6000, perDay: 1_000_000, algorithm: 'gcra', burst: 1000 } as const;

/** A replica holding a lease of 'k' of 10 units (granted at seq 4). */
async function holding() {
  const { store, asks, hooks } = scriptedStore();
  const leases = new QuotaLeases(store, SETTINGS, () => 5_000);
  for (let i = 0; i < 3; i++) expect(leases.admit('k', QUOTA, NO_BANS, 1)).toBeUndefined();
  asks[0]!.answer({ granted: 10, minuteCount: 500, dayCount: 500, seq: 4 });
  await settle();
  expect(leases.held('k')).toBe(10);
  return { leases, asks, hooks };
}

describe('lease recall', () => {
  it('a recall newer than the grant ends the lease, giving back its units and leaving the holders', async () => {
    const { leases, asks, hooks } = await holding();
    hooks.apply!(notice(3, 600, { recall: true, leasedUntilMs: MINUTE + 6_000 }));
    expect(leases.held('k')).toBe(10);
    hooks.apply!(notice(6, 600, { recall: true, leasedUntilMs: MINUTE + 6_000 }));
    expect(leases.held('k')).toBe(0);
    await settle();
    const back = asks.find(({ request }) => request.giveBack > 0)!.request;
    expect(back).toMatchObject({ giveBack: 10, ends: true, heldUntilMs: MINUTE + 5_000 + SETTINGS.leaseMs });
  });

  it('a lease with nothing left still leaves the holders when a recall ends it', async () => {
    const { leases, asks, hooks } = await holding();
    for (let i = 0; i < 10; i++) await leases.admit('k', QUOTA, NO_BANS, 1);
    expect(leases.held('k')).toBe(0);
    hooks.apply!(notice(6, 600, { recall: true, leasedUntilMs: MINUTE + 6_000 }));
    await settle();
    expect(asks.some(({ request }) => request.ends && request.giveBack === 0)).toBe(true);
  });

  it('gcra: a lease whose last block is empty still leaves the holders when it lapses', async () => {
    const { store, asks } = scriptedStore();
    const clock = { nowMs: 5_000 };
    const leases = new QuotaLeases(store, SETTINGS, () => clock.nowMs);
    for (let i = 0; i < 3; i++) expect(leases.admit('k', GCRA, NO_BANS, 1)).toBeUndefined();
    asks[0]!.answer({ granted: 10, seq: 4, minuteTatUs: (MINUTE + 5_000) * 1000 + 10 * 10_000 });
    await settle();
    // 9 of the first block: the renewal's block of 10 comes (gcra keeps blocks apart, rule 9).
    expect(leases.admit('k', GCRA, NO_BANS, 9)).toMatchObject({ verdict: 'allowed' });
    asks[1]!.answer({ granted: 10, seq: 5, minuteTatUs: (MINUTE + 5_000) * 1000 + 20 * 10_000 });
    await settle();
    // One request of 11 takes the first block's last unit and all of the second: the first block
    // counts it, and the second is left with no unit and no request.
    expect(leases.admit('k', GCRA, NO_BANS, 11)).toMatchObject({ verdict: 'allowed' });
    asks[2]?.answer({ granted: 0, seq: 6 });
    await settle();
    const before = asks.length;
    // Past both blocks' ends: the next request finds the lease lapsed.
    clock.nowMs += 60_000;
    expect(leases.admit('k', GCRA, NO_BANS, 1)).toBeUndefined();
    // (A key's give-backs go one after the other: each waits for the answer to the one before.)
    await settle();
    for (let i = before; i < asks.length; i++) {
      asks[i]!.answer({ granted: 0, seq: 7 + i });
      await settle();
    }
    // Both blocks lapsed: the holder ends its lease in Redis (rule 10), or a refusal there would
    // wait out the grace for units nobody holds.
    const giveBacks = asks.slice(before).map(({ request }) => request);
    expect(giveBacks.filter((r) => r.ends)).toHaveLength(1);
    expect(giveBacks.reduce((sum, r) => sum + r.giveBack, 0)).toBe(0);
  });

  it('a recalled request waits for a newer notice that no lease is left', async () => {
    const { leases, hooks } = await holding();
    let done = false;
    const waiting = leases.recalled('k', { seq: 6, leasedUntilMs: MINUTE + 60_000, nowMs: MINUTE + 5_000 }).then(() => (done = true));
    // Older, or with a lease still out: it keeps waiting.
    hooks.apply!(notice(5, 600, { leasedUntilMs: 0 }));
    hooks.apply!(notice(7, 600, { leasedUntilMs: MINUTE + 6_000 }));
    hooks.apply!(notice(8, 600));
    await settle();
    expect(done).toBe(false);
    hooks.apply!(notice(9, 590, { leasedUntilMs: 0 }));
    await waiting;
    expect(done).toBe(true);
  });

  it('a recalled request no notice answers is decided again at its bound', async () => {
    const { leases } = await holding();
    const startedMs = performance.now();
    await leases.recalled('k', { seq: 6, leasedUntilMs: MINUTE + 5_020, nowMs: MINUTE + 5_000 });
    // Not before 'le' at the recall (a holder may still admit until then); bounded by it.
    expect(performance.now() - startedMs).toBeGreaterThanOrEqual(20 + RECALL_GRACE_MS - 5);
  });

  it('a recall of a lease about to lapse still waits 150 ms for its holder (a loaded one) to give back', async () => {
    const { leases, hooks } = await holding();
    let done = false;
    const waiting = leases.recalled('k', { seq: 6, leasedUntilMs: MINUTE + 5_005, nowMs: MINUTE + 5_000 }).then(() => (done = true));
    // Timers run in order of expiry: the bound's, if under 150 ms, would have run before this one.
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(done).toBe(false);
    hooks.apply!(notice(9, 590, { leasedUntilMs: 0 }));
    await waiting;
    expect(done).toBe(true);
  });

  it("a request waits for its replica's own ask and takes from the block it brings", async () => {
    const { store, asks } = scriptedStore();
    const leases = new QuotaLeases(store, SETTINGS, () => 5_000);
    for (let i = 0; i < 3; i++) expect(leases.admit('k', QUOTA, NO_BANS, 1)).toBeUndefined();
    const waiting = leases.admit('k', QUOTA, NO_BANS, 1);
    expect(waiting).toBeInstanceOf(Promise);
    asks[0]!.answer({ granted: 10, minuteCount: 500, dayCount: 500, seq: 4 });
    expect((await waiting)!.verdict).toBe('allowed');
    expect(leases.held('k')).toBe(9);
    // Refused a block: the waiting request goes to Redis (undefined), as it would have.
    const refused = scriptedStore();
    const other = new QuotaLeases(refused.store, SETTINGS, () => 5_000);
    for (let i = 0; i < 3; i++) void other.admit('k', QUOTA, NO_BANS, 1);
    const next = other.admit('k', QUOTA, NO_BANS, 1);
    refused.asks[0]!.answer({ granted: 0 });
    expect(await next).toBeUndefined();
  });

  it('a request that stopped waiting for the ask (its time on Redis ran out) takes nothing from the block', async () => {
    const { store, asks } = scriptedStore();
    const leases = new QuotaLeases(store, SETTINGS, () => 5_000);
    for (let i = 0; i < 3; i++) expect(leases.admit('k', QUOTA, NO_BANS, 1)).toBeUndefined();
    const waiter: { redisWaitOver?: boolean } = {};
    const waiting = leases.admit('k', QUOTA, NO_BANS, 1, waiter);
    expect(waiting).toBeInstanceOf(Promise);
    // The gateway answered it meanwhile (gateway/redis-wait.ts): the block's units stay whole.
    waiter.redisWaitOver = true;
    asks[0]!.answer({ granted: 10, minuteCount: 500, dayCount: 500, seq: 4 });
    expect(await waiting).toBeUndefined();
    expect(leases.held('k')).toBe(10);
  });

  it('an ask that fails fails the requests that waited for it, with its error: they are not sent to Redis for another timeout', async () => {
    const { store, asks } = scriptedStore();
    const leases = new QuotaLeases(store, SETTINGS, () => 5_000);
    for (let i = 0; i < 3; i++) expect(leases.admit('k', QUOTA, NO_BANS, 1)).toBeUndefined();
    const waiting = leases.admit('k', QUOTA, NO_BANS, 1);
    expect(waiting).toBeInstanceOf(Promise);
    const timedOut = new Error('Command timed out');
    asks[0]!.fail(timedOut);
    await expect(waiting).rejects.toBe(timedOut);
    // Nothing is held, and the next request is Redis's again, or a new ask.
    expect(leases.held('k')).toBe(0);
  });
});
