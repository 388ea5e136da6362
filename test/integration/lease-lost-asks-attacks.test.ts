import { describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { leaseHoldersKey, quotaKey } from '../../src/store/redis/redis-keys.js';
import type { LeaseGrant } from '../../src/store/quota-store.js';
import { redisForFile } from '../helpers/redis-for-file.js';
import { leaseAsk, leaseEnd } from '../helpers/lease-requests.js';

// Reviewer's attacks on 5234e5b (lost lease asks named by the key's next ask, `cancelFrom`).
// One real redis-server, one injected store clock; each case is a sequence of LEASE_SCRIPT steps
// a QuotaLeases replica can send (test/unit/quota-lease-lost-asks-attacks.test.ts shows the
// replica side: `lost` outlives a plan change, so the next ask names it under the new plan).

const redis = redisForFile();

const LEASE_MS = 1000;
const T0 = Date.UTC(2031, 2, 4, 10, 0, 10);
const ban: BanPolicy = { afterRejections: 1000, window: 60, duration: 60 };
const FIXED: Quota = { perMinute: 1000, perDay: 1_000_000 };
const CREDITS: Quota = { perMinute: 1000, perDay: 1_000_000, credits: 'required' };
// T = ceil(60 s / 5001) = 11 998 µs.
const GCRA_FAST: Quota = { perMinute: 6000, perDay: 1_000_000, algorithm: 'gcra', burst: 1000 };
// The same key moved to a slower plan: T = ceil(60 s / 2001) = 29 986 µs.
const GCRA_SLOW: Quota = { perMinute: 3000, perDay: 1_000_000, algorithm: 'gcra', burst: 1000 };

let run = 0;

function keyOf() {
  const clock = { nowMs: T0 };
  const store = new RedisQuotaStore(redis.client(), () => clock.nowMs);
  const subject = `attack-${++run}`;
  const ask = (quota: Quota, block: number, want: number, opts: { cancelFrom?: number; holder?: string } = {}) =>
    store.reserve(subject, quota, ban, leaseAsk(block, want, opts.cancelFrom, opts.holder));
  /** The give-back a lease's end sends (quota-leases.ts giveBack with ends). */
  const end = (quota: Quota, grant: LeaseGrant, block: number, left: number, giveBackNo: number, holder = 'h1') =>
    store.reserve(subject, quota, ban, leaseEnd(quota, grant, block, left, giveBackNo, holder));
  const counts = async (quota: Quota) => {
    const now = await store.usage(subject, quota);
    return { minute: now.minuteCount, day: now.dayCount, tatUs: now.minuteTatUs };
  };
  return { clock, store, subject, ask, end, counts };
}

describe('attacks on lost lease asks (5234e5b)', () => {
  // NEW, over-admission of prepaid credits (fixed on rev-lost by the commit after the attacks:
  // the record carries the credits its grant spent; it.fails before it). The cancel reads "did the block take credits" from
  // the *naming* ask's quota (ARGV[32]), not from the grant's record. A key whose lost ask was
  // granted on a plan without credits and that moves to a `credits: required` plan (keys.onChange:
  // QuotaLeases.forget ends leases but keeps `lost`) has its next ask credit the lost block's
  // units to 'cb' as credits, though that block took none, taken out of 'lc' (another replica's
  // block). Measured: cb 80 after the cancel, where 50 is right (100 added, 50 on h2's block):
  // h2 then admits its 50 from memory and Redis admits 80 more from 'cb': 130 credits spent of 100.
  it('credits: a lost block granted under a plan without credits gives back no credits when named under a credits plan', async () => {
    const k = keyOf();
    await k.store.changeCredits(k.subject, { add: 100 });
    await k.ask(FIXED, 1, 30); // h1, old plan (no credits): its answer lost
    // The key moves to the credits plan; h2 takes a block of it (50 credits out on it).
    expect((await k.ask(CREDITS, 1, 50, { holder: 'h2' })).creditBalance).toBe(50);
    // h1's next ask (new plan) names its lost ask 1 and asks for nothing.
    const named = await k.ask(CREDITS, 2, 0, { cancelFrom: 1 });
    // The windows get the 30 units back (they were taken from them): right.
    expect(await k.counts(CREDITS)).toMatchObject({ minute: 50, day: 50 });
    // The balance must not grow: the lost block took no credits.
    expect(named.creditBalance).toBe(50); // measured 80
  });

  // NEW (fixed with the one above), the reverse (the original bug left in place): a lost block that took credits under a
  // credits plan, named after the key moved to a plan without them, gives its units back but not
  // its credits. Measured: cb 70 (the lost 30 credits stay spent; 'lc' keeps 30 no block holds).
  it('credits: a lost block that took credits gives them back when named under a plan without credits', async () => {
    const k = keyOf();
    await k.store.changeCredits(k.subject, { add: 100 });
    await k.ask(CREDITS, 1, 30); // lost: 30 credits taken
    await k.ask(FIXED, 2, 0, { cancelFrom: 1 });
    expect((await k.store.changeCredits(k.subject, {})).after).toBe(100); // measured 70
  });

  // NEW, gcra over-admission (fixed on rev-lost: the record carries its grant's interval; it.fails before). The cancel takes `units × intervalUs` off the TAT with the naming
  // ask's interval (ARGV[12]), not the one the lost block's cells were charged at. A key moved to a
  // plan with a longer interval (a lower perMinute) between the lost ask and its name gets its TAT
  // moved below where it stood before the lost grant. Measured: 20 cells charged at 11 998 µs
  // (239 960 µs) taken off as 20 × 29 986 µs = 599 720 µs: the TAT ends 359 760 µs below
  // the first block's end, 12 cells of the slow plan admitted past its limit.
  it("gcra: a named lost block comes off the TAT by the cells it was charged, whatever the key's plan is now", async () => {
    const k = keyOf();
    await k.ask(GCRA_FAST, 1, 10); // answered, in use
    const afterFirst = (await k.counts(GCRA_FAST)).tatUs;
    await k.ask(GCRA_FAST, 2, 20); // lost: 20 cells at 11 998 µs above the first block
    expect((await k.counts(GCRA_FAST)).tatUs).toBe(afterFirst + 20 * 11_998);
    k.clock.nowMs += 1;
    await k.ask(GCRA_SLOW, 3, 0, { cancelFrom: 2 }); // the key's new plan names it
    const tatUs = (await k.counts(GCRA_SLOW)).tatUs;
    expect(afterFirst - tatUs).toBe(0); // measured 359 760
  });

  // Was a hole (mended: an ending step leaves the records): a lease's ending step deleted
  // 'g:<holder>' whenever the holder's end equalled the lease's heldUntilMs. A renewal granted in
  // the same Redis millisecond as the lease's grant (a tiny block near the limit, renewed after one
  // request) has the same end, so when its answer was lost and the lease then ended, the end step
  // deleted the lost grant's record: the name found nothing, and the lost block stayed counted.
  // Measured before: minute 40 (the used 10, the lost renewal's 20, the naming ask's 10); right: 20.
  it("a lease ending in the same millisecond's end as a lost renewal's grant leaves that grant's record to its name", async () => {
    const k = keyOf();
    const first = await k.ask(FIXED, 1, 10); // answered: the lease
    await k.ask(FIXED, 2, 20); // its renewal, same ms: answer lost
    await k.end(FIXED, first, 1, 0, 0); // the lease lapses, its block used up: the ending step
    k.clock.nowMs += 2 * LEASE_MS;
    await k.ask(FIXED, 3, 10, { cancelFrom: 2 });
    expect(await k.counts(FIXED)).toMatchObject({ minute: 20, day: 20 }); // 10 used + 10 new; measured 40
  });

  // Was stuck-ish (mended: the record keeps the holder's end before the grant): the name gave the
  // lost block back but left the lost grant's holder entry and 'le' (T0 + leaseMs), so a request
  // at the limit was recalled and waited for a lease nobody held (up to le + RECALL_GRACE_MS).
  it('after the name: the lost grant holds the key no more (holder entry and le), no lease being out', async () => {
    const k = keyOf();
    await k.ask(FIXED, 1, 20); // lost (an open: the replica holds no lease of the key)
    k.clock.nowMs += 1;
    // The name, on an ask granted nothing (here: asking for nothing; a key near its limit alike).
    expect((await k.ask(FIXED, 2, 0, { cancelFrom: 1 })).granted).toBe(0);
    expect(await k.counts(FIXED)).toMatchObject({ minute: 0, day: 0 });
    const holders = await redis.client().hgetall(leaseHoldersKey(k.subject));
    expect(Object.keys(holders)).toEqual([]);
    const le = Number(await redis.client().hget(quotaKey(k.subject), 'le'));
    expect(le).toBe(0);
  });

  it("a lost renewal named while its lease is still out: the holder keeps that lease's end", async () => {
    const k = keyOf();
    await k.ask(FIXED, 1, 10); // answered: the lease, to T0 + leaseMs
    k.clock.nowMs += 300;
    await k.ask(FIXED, 2, 20); // the renewal, to T0 + 300 + leaseMs: answer lost
    k.clock.nowMs += 1;
    await k.ask(FIXED, 3, 0, { cancelFrom: 2 }); // the next renewal names it, granted nothing
    expect(await k.counts(FIXED)).toMatchObject({ minute: 10, day: 10 });
    expect(await redis.client().hget(leaseHoldersKey(k.subject), 'h1')).toBe(String(T0 + LEASE_MS));
    expect(Number(await redis.client().hget(quotaKey(k.subject), 'le'))).toBe(T0 + LEASE_MS);
  });

  // The record is one field per holder, kept for as long as any replica keeps granting (the
  // holders' sweep drops a holder's field once its units cannot be out, never its record, which a
  // lost ask's name may still need after that: a failover's outage is longer than the grace). One
  // field per process that held the key.
  it("a grant's record outlives its holder entry while the key stays hot, one per holder", async () => {
    const k = keyOf();
    await k.ask(FIXED, 1, 10, { holder: 'dead' });
    k.clock.nowMs += LEASE_MS + 1000; // past its end and the grace
    const live = await k.ask(FIXED, 1, 10, { holder: 'live' });
    await k.end(FIXED, live, 1, 10, 1, 'live'); // the live one's end sweeps the holders
    const holders = await redis.client().hgetall(leaseHoldersKey(k.subject));
    expect(Object.keys(holders).sort()).toEqual(['g:dead', 'g:live']);
  });
});
