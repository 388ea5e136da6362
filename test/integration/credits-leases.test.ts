import { afterEach, describe, expect, it } from 'vitest';
import type { Quota } from '../../src/config/plans-schema.js';
import { QuotaLeases } from '../../src/quota/quota-leases.js';
import type { QuotaOutcome } from '../../src/quota/quota-state.js';
import { usageRows } from '../../src/quota/usage-export.js';
import { leaseHoldersKey, QUOTA_NOTICE_CHANNEL, quotaKey } from '../../src/store/redis/redis-keys.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { RedisUsageReader } from '../../src/store/redis/redis-usage-reader.js';
import type { LeaseRequest } from '../../src/store/quota-store.js';
import { leaseReplicas, NO_BANS, SETTINGS, type Replica } from '../helpers/lease-replicas.js';
import { pollUntil } from '../helpers/poll.js';
import { random } from '../helpers/random.js';
import { redisForFile } from '../helpers/redis-for-file.js';

// Credit leases (quota-leases.ts, rule 14) on a real redis-server: a lease of a `credits: required`
// key also holds a block of its balance. Replicas of the quota step in this process on one injected
// clock (Redis's and theirs; lease-replicas.ts, without notices: a recall is answered by the test,
// as the holders would), except the last test, which needs Redis's own clock for its notice.
// Each test checks the balance in Redis against the requests admitted: never below zero, each
// admitted request spending its cost once, unused credits back once.

const redis = redisForFile();
const PREPAID: Quota = { perMinute: 100_000, perDay: 10_000_000, credits: 'required' };
const HOUR_MS = 3_600_000;

const clock = { nowMs: 0 };
const replicas = leaseReplicas(clock);
const open = async (count: number) => Promise.all(Array.from({ length: count }, () => replicas.open(redis.server().url)));
const untilLeased = (r: Replica, subject: string) => replicas.untilLeased(r, subject, PREPAID);
afterEach(() => replicas.closeAll());

const balance = async (store: RedisQuotaStore, subject: string) => (await store.changeCredits(subject, {})).after;

/** The usage rows' admitted units and credits spent for `subject` around the clock. */
async function usageOf(subject: string, nowMs: number): Promise<{ units: number; credits: number }> {
  const reader = new RedisUsageReader(redis.client());
  const total = { units: 0, credits: 0 };
  const query = { fromMs: nowMs - 2 * HOUR_MS, toMs: nowMs + 2 * HOUR_MS, by: 'hour' as const, format: 'jsonl' as const };
  for await (const row of usageRows(reader.days(query.fromMs, query.toMs), query)) {
    if (row.consumer !== subject) continue;
    total.units += row.units;
    total.credits += row.credits;
  }
  return total;
}

const giveBack = (n: number, no: number, epoch = 0): LeaseRequest => ({
  want: 0,
  divisor: 1,
  minBlock: 1,
  leaseMs: 200,
  giveBack: n,
  giveBackMinuteStartMs: 0,
  giveBackDayStartMs: 0,
  holder: 'replica-x',
  ends: false,
  heldUntilMs: 0,
  giveBackNo: no,
  giveBackCredits: n,
  giveBackCreditEpoch: epoch,
});

describe('credit leases', { timeout: 120_000 }, () => {
  it('takes a block from the balance, tells the balance plus its own block, gives the unused credits back once; usage spends what the balance lost', async () => {
    clock.nowMs = Date.UTC(2030, 0, 10, 12, 0, 5);
    const [r] = await open(1);
    await r!.store.changeCredits('cl-block', { set: 1000 });
    let admitted = await untilLeased(r!, 'cl-block');
    // The block is out of Redis's balance already: Redis holds the rest.
    const held = r!.leases.held('cl-block');
    expect(await balance(r!.store, 'cl-block')).toBe(1000 - admitted - held);
    // Twice the block, all from the lease and its renewals (requests wait for a renewal on its way).
    let leased: QuotaOutcome | undefined;
    for (let i = 0; i < 2 * held; i++) {
      clock.nowMs += 1;
      leased = await r!.leases.admit('cl-block', PREPAID, NO_BANS, 1);
      expect(leased?.verdict).toBe('allowed');
      admitted++;
    }
    // Redis's balance at the last renewal plus this replica's unused block: with one replica,
    // exactly what is left.
    expect(leased!.creditBalance).toBe(1000 - admitted);
    await r!.leases.close();
    expect(await balance(r!.store, 'cl-block')).toBe(1000 - admitted);
    expect(await usageOf('cl-block', clock.nowMs)).toEqual({ units: admitted, credits: admitted });

    // A give-back run twice (its reply lost) returns its credits once; one of credits no block
    // holds (a Redis restarted empty since the grant) returns none.
    const grant = await r!.store.reserve('cl-once', PREPAID, NO_BANS, { ...giveBack(0, 0), want: 10 });
    expect(grant.granted).toBe(0);
    await r!.store.changeCredits('cl-once', { set: 100 });
    const taken = await r!.store.reserve('cl-once', PREPAID, NO_BANS, { ...giveBack(0, 0), want: 10 });
    expect([taken.granted, taken.creditBalance]).toEqual([10, 90]);
    await r!.store.reserve('cl-once', PREPAID, NO_BANS, giveBack(10, 1, taken.creditEpoch));
    await r!.store.reserve('cl-once', PREPAID, NO_BANS, giveBack(10, 1, taken.creditEpoch));
    expect(await balance(r!.store, 'cl-once')).toBe(100);
    await r!.store.reserve('cl-once', PREPAID, NO_BANS, giveBack(10, 2, taken.creditEpoch));
    expect(await balance(r!.store, 'cl-once')).toBe(100);
  });

  it('three replicas spend a balance of 300 exactly, never below zero; a request it cannot cover while blocks are out recalls them first', async () => {
    clock.nowMs = Date.UTC(2030, 0, 10, 12, 1, 5);
    const fleet = await open(3);
    await fleet[0]!.store.changeCredits('cl-fleet', { set: 300 });
    const next = random(43);
    let admitted = 0;
    let recalls = 0;
    // What a recall notice makes every holder do: end its lease, giving its unused credits back.
    const recall = async () => {
      recalls++;
      await Promise.all(fleet.map((r) => r.leases.close()));
    };
    let refusal: QuotaOutcome | undefined;
    for (let step = 0; step < 5_000 && !refusal; step++) {
      clock.nowMs += Math.floor(next() * 12);
      const { store, leases } = fleet[Math.floor(next() * 3)]!;
      const cost = 1 + Math.floor(next() * 3);
      const outcome =
        (await leases.admit('cl-fleet', PREPAID, NO_BANS, cost)) ??
        (await store.consume('cl-fleet', PREPAID, NO_BANS, cost, undefined, recall));
      if (outcome.verdict === 'allowed') admitted += cost;
      else refusal = outcome;
      expect(await balance(store, 'cl-fleet')).toBeGreaterThanOrEqual(0);
    }
    expect(refusal?.verdict).toBe('unfunded');
    expect(recalls).toBeGreaterThan(0);
    // Blocks that ended on the clock but were not given back yet (a replica's sweep) come back now.
    await Promise.all(fleet.map((r) => r.leases.close()));
    const left = await balance(fleet[0]!.store, 'cl-fleet');
    expect(admitted + left).toBe(300);
    expect(await usageOf('cl-fleet', clock.nowMs)).toEqual({ units: admitted, credits: admitted });
    // What is left is spent to the last credit, then 402.
    for (let i = 0; i < left; i++) expect((await fleet[1]!.store.consume('cl-fleet', PREPAID, NO_BANS, 1)).verdict).toBe('allowed');
    expect((await fleet[1]!.store.consume('cl-fleet', PREPAID, NO_BANS, 1)).verdict).toBe('unfunded');
  });

  it('a top-up while a block is out adds to the balance; a set makes the blocks out spent', async () => {
    clock.nowMs = Date.UTC(2030, 0, 10, 12, 2, 5);
    const [r] = await open(1);
    await r!.store.changeCredits('cl-add', { set: 1000 });
    const admitted = await untilLeased(r!, 'cl-add');
    expect(await r!.store.changeCredits('cl-add', { add: 500 })).toMatchObject({ applied: true });
    await r!.leases.close();
    expect(await balance(r!.store, 'cl-add')).toBe(1500 - admitted);

    const [s] = await open(1);
    await s!.store.changeCredits('cl-set', { set: 1000 });
    await untilLeased(s!, 'cl-set');
    // The block out is spent by the set; a block granted after it is of the new balance. The old
    // one's give-back, even after the new grant, returns nothing; the new one's unused credits come back.
    expect(await s!.store.changeCredits('cl-set', { set: 50 })).toMatchObject({ applied: true, after: 50 });
    const [t] = await open(1);
    const again = await untilLeased(t!, 'cl-set');
    const heldAfterSet = t!.leases.held('cl-set');
    await s!.leases.close();
    expect(await balance(s!.store, 'cl-set')).toBe(50 - again - heldAfterSet);
    await t!.leases.close();
    expect(await balance(t!.store, 'cl-set')).toBe(50 - again);
  });

  it('a set while a lease may admit publishes a recall with the new balance, and the holder ends its lease', async () => {
    // Redis's own clock (the set reads it): a lease of 10 s, so it is still out at the set.
    const store = new RedisQuotaStore(redis.client());
    const leases = new QuotaLeases(store, { ...SETTINGS, leaseMs: 10_000 });
    const heard: string[] = [];
    const listener = redis.server().client();
    try {
      await listener.subscribe(QUOTA_NOTICE_CHANNEL);
      listener.on('message', (_channel: string, message: string) => heard.push(message));
      await store.changeCredits('cl-recall', { set: 1000 });
      for (let i = 0; i < 200 && leases.held('cl-recall') === 0; i++) {
        if (!(await leases.admit('cl-recall', PREPAID, NO_BANS, 1))) await store.consume('cl-recall', PREPAID, NO_BANS, 1);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      expect(leases.held('cl-recall')).toBeGreaterThan(0);
      heard.length = 0;
      await store.changeCredits('cl-recall', { set: 7 });
      const recall = await pollUntil(
        async () => heard.map((m) => m.split(' ')).find((f) => f[0] === quotaKey('cl-recall') && f[12] === '1'),
        (found) => found !== undefined,
        { deadline: Date.now() + 10_000 },
      );
      expect(recall?.[13]).toBe('7');
      // The holder ended its lease (it leaves the key's holders in Redis), returning nothing. (Its
      // last grant's record, 'g:<holder>', stays: quota-script.ts LEASE_SCRIPT.)
      const holders = await pollUntil(
        async () => (await redis.client().hkeys(leaseHoldersKey('cl-recall'))).filter((f) => !/^[bg]:/.test(f)).length,
        (n) => n === 0 && leases.held('cl-recall') === 0,
        { deadline: Date.now() + 10_000 },
      );
      expect(holders).toBe(0);
      expect(await balance(store, 'cl-recall')).toBe(7);
    } finally {
      listener.disconnect();
      await leases.close();
      await store.close();
    }
  });
});
