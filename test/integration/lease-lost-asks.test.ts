import { describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { leaseHoldersKey } from '../../src/store/redis/redis-keys.js';
import { redisForFile } from '../helpers/redis-for-file.js';
import { ruleCharge } from '../helpers/rule-charges.js';
import { leaseAsk, leaseRequest } from '../helpers/lease-requests.js';

// A lease ask whose answer a replica never heard (a connection cut, a timeout) may still have been
// granted: its units are counted (and, for a credits key, its credits taken) and never admitted or
// given back. The replica names it in the key's next ask (`cancelFrom`, quota-leases.ts rule 5),
// and LEASE_SCRIPT gives that block back in the same step, from the record each grant leaves
// ('g:<holder>'). One real redis-server, one injected clock.

const redis = redisForFile();

const LEASE_MS = 1000;
const T0 = Date.UTC(2031, 2, 4, 10, 0, 10);
const ban: BanPolicy = { afterRejections: 1000, window: 60, duration: 60 };
const FIXED: Quota = { perMinute: 1000, perDay: 1_000_000 };
const CREDITS: Quota = { perMinute: 1000, perDay: 1_000_000, credits: 'required' };
// T = 10 ms, a burst leases can take blocks of.
const GCRA: Quota = { perMinute: 6000, perDay: 1_000_000, algorithm: 'gcra', burst: 1000 };

let run = 0;

function replicaOf(quota: Quota) {
  const clock = { nowMs: T0 };
  const store = new RedisQuotaStore(redis.client(), () => clock.nowMs);
  const subject = `lost-${++run}`;
  /** Ask `block` of `want` units as holder `holder`, naming the unanswered asks from `cancelFrom`. */
  const ask = (block: number, want: number, cancelFrom = 0, holder = 'h1') =>
    store.reserve(subject, quota, ban, leaseAsk(block, want, cancelFrom, holder));
  const counts = async () => {
    const now = await store.usage(subject, quota);
    return { minute: now.minuteCount, day: now.dayCount, tatUs: now.minuteTatUs };
  };
  return { clock, store, subject, ask, counts };
}

describe('a lease ask whose answer was never heard', () => {
  it("is given back by the key's next ask, which names it: the counts hold the blocks in use only", async () => {
    const r = replicaOf(FIXED);
    expect((await r.ask(1, 10)).granted).toBe(10); // answered: in use
    expect((await r.ask(2, 20)).granted).toBe(20); // its answer lost
    expect((await r.ask(3, 30, 2)).granted).toBe(30);
    expect(await r.counts()).toMatchObject({ minute: 40, day: 40 });
    // Without the name, the lost block stays counted, never admitted.
    const control = replicaOf(FIXED);
    await control.ask(1, 10);
    await control.ask(2, 20);
    await control.ask(3, 30);
    expect(await control.counts()).toMatchObject({ minute: 60, day: 60 });
  });

  it('gives back nothing when the named ask never ran: the last grant is one whose answer was heard', async () => {
    const r = replicaOf(FIXED);
    await r.ask(1, 10);
    // Ask 2 never reached Redis; ask 3 names it.
    expect((await r.ask(3, 30, 2)).granted).toBe(30);
    expect(await r.counts()).toMatchObject({ minute: 40, day: 40 });
    // Nor is an answered grant given back by a later name (ask 4 answered, 5 lost... named by 6).
    await r.ask(4, 5);
    await r.ask(6, 5, 5);
    expect(await r.counts()).toMatchObject({ minute: 50, day: 50 });
  });

  it('two unanswered in a row: the next names the first, and the later grant goes back too', async () => {
    const r = replicaOf(FIXED);
    await r.ask(1, 10);
    await r.ask(2, 20); // lost
    await r.ask(3, 30, 2); // lost as well: it gave back ask 2's block, and was granted 30
    expect((await r.ask(4, 5, 2)).granted).toBe(5);
    expect(await r.counts()).toMatchObject({ minute: 15, day: 15 });
  });

  it("another holder's give-back leaves a lost grant's record alone (it is no holder), and only the one holder's record is named", async () => {
    const r = replicaOf(FIXED);
    await r.ask(1, 20, 0, 'h1'); // lost
    const other = await r.ask(2, 10, 0, 'h2');
    // h2 ends its lease, giving back its 10: h1 is still a holder, its record kept (and h2's: it
    // may be a lost renewal's, lease-lost-asks-attacks.test.ts).
    await r.store.reserve(
      r.subject,
      FIXED,
      ban,
      leaseRequest({
        giveBack: 10,
        giveBackMinuteStartMs: other.minuteStartMs,
        giveBackDayStartMs: other.dayStartMs,
        holder: 'h2',
        ends: true,
        heldUntilMs: other.nowMs + LEASE_MS,
        giveBackNo: 1,
        giveBackHashEpoch: other.hashEpoch,
      }),
    );
    const holders = await redis.client().hgetall(leaseHoldersKey(r.subject));
    expect(Object.keys(holders).sort()).toEqual(['g:h1', 'g:h2', 'h1']);
    // h2 naming its own unanswered ask 3 (which never ran): its record is of ask 2, answered and
    // given back, and nothing of h1's is h2's to name.
    await r.ask(4, 5, 3, 'h2');
    expect(await r.counts()).toMatchObject({ minute: 25 });
    await r.ask(5, 5, 1, 'h1');
    expect(await r.counts()).toMatchObject({ minute: 10 });
  });

  it('credits: the lost block gives its credits back to the balance', async () => {
    const r = replicaOf(CREDITS);
    await r.store.changeCredits(r.subject, { add: 100 });
    await r.ask(1, 30); // lost
    // 100, less the new block's 10: the lost block's 30 are back (70 stood without the name).
    expect((await r.ask(2, 10, 1)).creditBalance).toBe(90);
    expect((await r.store.changeCredits(r.subject, {})).after).toBe(90);
  });

  it('gcra: the lost block at the top of the schedule comes off it', async () => {
    const r = replicaOf(GCRA);
    await r.ask(1, 10); // answered
    const afterFirst = (await r.counts()).tatUs;
    await r.ask(2, 20); // lost: 20 cells above the first block
    r.clock.nowMs += 1;
    await r.ask(3, 0, 2); // names it, asks for nothing
    expect((await r.counts()).tatUs).toBe(afterFirst);
  });

  it("a limit rule's counter: the lost block goes back to the window it was counted in", async () => {
    const clock = { nowMs: T0 };
    const store = new RedisQuotaStore(redis.client(), () => clock.nowMs);
    const rule = ruleCharge('lost', 1000, 60_000, false, 1, `lost-rule-${++run}`);
    const ask = leaseAsk;
    await store.reserveRule!(rule, ask(1, 10)); // answered
    await store.reserveRule!(rule, ask(2, 20)); // lost
    await store.reserveRule!(rule, ask(3, 30, 2)); // lost as well
    const last = await store.reserveRule!(rule, ask(4, 5, 2));
    expect(last.minuteCount).toBe(15);
    // Never the answered block: a name from after it finds nothing.
    expect((await store.reserveRule!(rule, ask(6, 5, 5))).minuteCount).toBe(20);
  });

  it('a Redis restarted empty: the name finds no grant and gives nothing back', async () => {
    const r = replicaOf(FIXED);
    await r.ask(1, 20); // lost
    await redis.client().flushdb();
    expect((await r.ask(2, 10, 1)).granted).toBe(10);
    expect(await r.counts()).toMatchObject({ minute: 10, day: 10 });
  });
});
