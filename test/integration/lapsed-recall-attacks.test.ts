import { afterEach, describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { gcraMinute } from '../../src/quota/gcra.js';
import type { RuleCharge } from '../../src/quota/limit-rules.js';
import { QuotaLeases, RECALL_GRACE_MS, type LeaseSettings } from '../../src/quota/quota-leases.js';
import { QUOTA_NOTICE_CHANNEL, quotaKey } from '../../src/store/redis/redis-keys.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import type { LeaseGrant, LeaseRequest, Recall } from '../../src/store/quota-store.js';
import { redisForFile } from '../helpers/redis-for-file.js';

// A reviewer's attacks on recalls while a lapsed lease's units count as out (RECALL_GRACE_MS past
// its end; quota-script.ts CLOCK's unitsOut): holders killed after their lease lapsed, sustained
// overload, bans, notices, grants held back, rules, seq, gcra, credits, MULTI_QUOTA_SCRIPT. Each at
// script level with one injected clock and holders played by hand (store.reserve / reserveRule),
// as lapsed-lease-recall.test.ts does.

const redis = redisForFile();

const LEASE_MS = 1000;
const quota: Quota = { perMinute: 30, perDay: 1_000_000 };
const wide: Quota = { perMinute: 1_000_000, perDay: 1_000_000 };
const noBans: BanPolicy = { afterRejections: 1_000_000, window: 60, duration: 60 };
const SETTINGS: LeaseSettings = { leaseMs: LEASE_MS, hotPerSecond: 1e9, minBlock: 1, maxBlock: 50, spread: 1, replicas: 1 };

const rule = (digest: string): RuleCharge => ({
  name: 'review',
  digest,
  limit: 30,
  windowMs: 60_000,
  gcra: false,
  intervalUs: 0,
  burst: 0,
  cost: 1,
});

/** A holder's ask for `want` units (block `no`), or the give-back of `left` unused units of `grant`, ending its lease. */
const ask = (holder: string, want: number, giveBack?: { grant: LeaseGrant; left: number; no?: number }, block = 0): LeaseRequest => ({
  want,
  divisor: 1,
  minBlock: 1,
  giveBack: giveBack?.left ?? 0,
  giveBackMinuteStartMs: giveBack?.grant.minuteStartMs ?? 0,
  giveBackDayStartMs: giveBack?.grant.dayStartMs ?? 0,
  giveBackMonthStartMs: giveBack?.grant.monthStartMs ?? 0,
  leaseMs: LEASE_MS,
  block,
  giveBackBlock: giveBack?.no ?? 0,
  holder,
  ends: giveBack !== undefined,
  heldUntilMs: giveBack ? giveBack.grant.nowMs + LEASE_MS : 0,
  giveBackNo: giveBack ? 1 : 0,
  giveBackCredits: giveBack?.left ?? 0,
  giveBackCreditEpoch: giveBack?.grant.creditEpoch ?? 0,
  giveBackHashEpoch: giveBack?.grant.hashEpoch ?? 0,
});

const closing: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  for (const c of closing.splice(0).reverse()) await c.close();
});

function storeAt(clock: { nowMs: number }): RedisQuotaStore {
  const store = new RedisQuotaStore(redis.client(), () => clock.nowMs);
  closing.push(store);
  return store;
}

/** The recall's bound as QuotaLeases.recalled sets its timer (rule 11). */
const boundOf = (r: Recall) => Math.max(0, r.leasedUntilMs - r.nowMs) + RECALL_GRACE_MS;

/** A key at its limit of 30: a holder (`holder`) took 10 and never gives back (kill -9), Redis admitted 20. */
async function atLimitWithDeadHolder(store: RedisQuotaStore, subject: string): Promise<LeaseGrant> {
  const grant = await store.reserve(subject, quota, noBans, ask('dead', 10));
  expect(grant.granted).toBe(10);
  for (let i = 0; i < 20; i++) expect((await store.consume(subject, quota, noBans, 1)).verdict).toBe('allowed');
  return grant;
}

describe('a lapsed lease whose holder was killed', () => {
  it('sustained overload after the lapse: recalls only within the grace, each waiting at most the grace, then refused finally', async () => {
    const clock = { nowMs: Date.UTC(2030, 0, 10, 12, 0, 5) };
    const store = storeAt(clock);
    const subject = 'dead-overload';
    const grant = await atLimitWithDeadHolder(store, subject);
    const le = grant.nowMs + LEASE_MS;
    const recalledAt: number[] = [];
    const bounds: number[] = [];
    const seqs: number[] = [];
    for (let past = 0; past <= 700; past += 25) {
      clock.nowMs = le + past;
      const outcome = await store.consume(subject, quota, noBans, 1, undefined, async (_s, r) => {
        recalledAt.push(past);
        bounds.push(boundOf(r));
        seqs.push(r.seq);
      });
      expect(outcome.verdict).toBe('limited');
    }
    // Every refusal in [le, le + grace) waits (here: its bound), none after it.
    expect(recalledAt).toEqual(Array.from({ length: RECALL_GRACE_MS / 25 }, (_, i) => i * 25));
    expect(Math.max(...bounds)).toBe(RECALL_GRACE_MS);
    expect(seqs.every((s, i) => i === 0 || s > seqs[i - 1]!)).toBe(true);
    // The last recall's want: no block before le + 2 × grace at most.
    expect(Number(await redis.client().hget(quotaKey(subject), 'rq'))).toBe(le + 475 + RECALL_GRACE_MS);
  });

  it('bans at exactly the configured count when every refusal in the grace is recalled first', async () => {
    const clock = { nowMs: Date.UTC(2030, 0, 10, 12, 1, 5) };
    const store = storeAt(clock);
    const subject = 'dead-ban';
    const ban: BanPolicy = { afterRejections: 3, window: 60, duration: 60 };
    const grant = await store.reserve(subject, quota, ban, ask('dead', 10));
    for (let i = 0; i < 20; i++) await store.consume(subject, quota, ban, 1);
    clock.nowMs = grant.nowMs + LEASE_MS + 100;
    let recalls = 0;
    const verdicts: string[] = [];
    for (let i = 0; i < 5; i++) verdicts.push((await store.consume(subject, quota, ban, 1, undefined, async () => void recalls++)).verdict);
    expect(verdicts).toEqual(['limited', 'limited', 'banned', 'banned', 'banned']);
    expect(recalls).toBe(3);
  });

  it('notices under sustained overload: at most one per script call, none past the grace', async () => {
    const clock = { nowMs: Date.UTC(2030, 0, 10, 12, 2, 5) };
    const store = storeAt(clock);
    const subject = 'dead-storm';
    const grant = await atLimitWithDeadHolder(store, subject);
    // Heard from here on: the setup's own notices (a grant, admissions under a live lease) are not counted.
    const listener = redis.client().duplicate();
    const heard: string[] = [];
    listener.on('message', (_c: string, m: string) => heard.push(m.split(' ')[0]!));
    await listener.subscribe(QUOTA_NOTICE_CHANNEL);
    try {
      const le = grant.nowMs + LEASE_MS;
      let calls = 0;
      for (let past = 0; past < 2000; past += 10) {
        clock.nowMs = le + past;
        // Five requests of one turn: one script call.
        await Promise.all(Array.from({ length: 5 }, () => store.consume(subject, quota, noBans, 1, undefined, async () => {})));
        calls++;
      }
      await redis.client().publish(QUOTA_NOTICE_CHANNEL, 'end');
      await new Promise<void>((resolve) => {
        const check = () => (heard.includes('end') ? resolve() : setTimeout(check, 5));
        check();
      });
      const notices = heard.filter((k) => k === quotaKey(subject)).length;
      // Recalls in the grace (50 calls of 10 ms), nothing after it.
      expect(calls).toBe(200);
      expect(notices).toBe(RECALL_GRACE_MS / 10);
    } finally {
      listener.disconnect();
    }
  });

  it("rq blocks grants at most 2 × grace past le; units given back late are Redis's at once", async () => {
    const clock = { nowMs: Date.UTC(2030, 0, 10, 12, 3, 5) };
    const store = storeAt(clock);
    const subject = 'late-rq';
    const grant = await atLimitWithDeadHolder(store, subject);
    const le = grant.nowMs + LEASE_MS;
    clock.nowMs = le + RECALL_GRACE_MS - 1;
    await store.consume(subject, quota, noBans, 1, undefined, async () => {});
    // The holder was only slow: its give-back comes after the grace.
    clock.nowMs = le + RECALL_GRACE_MS + 100;
    await store.reserve(subject, quota, noBans, ask('dead', 0, { grant, left: 10 }));
    expect((await store.consume(subject, quota, noBans, 1)).verdict).toBe('allowed');
    clock.nowMs = le + 2 * RECALL_GRACE_MS - 2;
    expect((await store.reserve(subject, quota, noBans, ask('other', 5))).granted).toBe(0);
    clock.nowMs = le + 2 * RECALL_GRACE_MS - 1;
    expect((await store.reserve(subject, quota, noBans, ask('other', 5))).granted).toBe(5);
  });
});

describe('recall waiters', () => {
  async function leasesAt(clock: { nowMs: number }, store: RedisQuotaStore): Promise<QuotaLeases> {
    const leases = new QuotaLeases(store, SETTINGS, () => clock.nowMs);
    closing.push(leases);
    await store.noticesReady;
    return leases;
  }

  // Holder B's lease lapsed 50 ms ago and B was killed; holder A's lease is live. A request Redis
  // cannot fit is recalled (le = A's end). A gives back at once; Redis keeps B (within its grace),
  // so the notice says le = B's end (past, not 0). The waiter then waits no longer than B's grace,
  // 450 ms after the recall (it once waited its whole bound, A's end - now + grace = 1350 ms), and
  // is unanswered: B's units never came back.
  it("a live holder's give-back bounds the waiter by the end of the killed lapsed holder's grace", async () => {
    const clock = { nowMs: Date.UTC(2030, 0, 10, 12, 4, 5) };
    const store = storeAt(clock);
    const leases = await leasesAt(clock, store);
    const subject = 'live-and-dead';
    const t0 = clock.nowMs;
    expect((await store.reserve(subject, quota, noBans, ask('B', 10))).granted).toBe(10);
    clock.nowMs = t0 + 900;
    const grantA = await store.reserve(subject, quota, noBans, ask('A', 10));
    expect(grantA.granted).toBe(10);
    for (let i = 0; i < 10; i++) await store.consume(subject, quota, noBans, 1);
    clock.nowMs = t0 + LEASE_MS + 50;
    let waitedMs = -1;
    let heard: boolean | undefined;
    const outcome = await store.consume(subject, quota, noBans, 1, undefined, async (key, recall) => {
      const started = performance.now();
      const waiting = leases.recalled(key, recall);
      await store.reserve(subject, quota, noBans, ask('A', 0, { grant: grantA, left: 10 }));
      heard = await waiting;
      waitedMs = performance.now() - started;
    });
    expect(outcome.verdict).toBe('allowed');
    expect(heard).toBe(false);
    // B's grace ends 450 ms after the recall: no sooner (B might have given back), and well before the old 1350.
    expect(waitedMs).toBeGreaterThanOrEqual(440);
    expect(waitedMs).toBeLessThan(1300);
  });

  it('a give-back after the grace, while a recall waits for it, is announced: the waiter hears it and is admitted', async () => {
    const clock = { nowMs: Date.UTC(2030, 0, 10, 12, 5, 5) };
    const store = storeAt(clock);
    const leases = await leasesAt(clock, store);
    const subject = 'late-announced';
    const grant = await atLimitWithDeadHolder(store, subject);
    const le = grant.nowMs + LEASE_MS;
    clock.nowMs = le + 400;
    let heard: boolean | undefined;
    let waitedMs = 0;
    const outcome = await store.consume(subject, quota, noBans, 1, undefined, async (key, recall) => {
      const started = performance.now();
      const waiting = leases.recalled(key, recall);
      clock.nowMs = le + RECALL_GRACE_MS + 50;
      await store.reserve(subject, quota, noBans, ask('dead', 0, { grant, left: 10 }));
      heard = await waiting;
      waitedMs = performance.now() - started;
    });
    expect(outcome.verdict).toBe('allowed');
    // (Once unannounced: the waiter sat out its whole bound, 500 ms, unheard.)
    expect(heard).toBe(true);
    expect(waitedMs).toBeLessThan(RECALL_GRACE_MS);
  });
});

describe('recalls in the grace, other parts', () => {
  it('a limit rule with a killed lapsed holder: at most rules + 1 recalls, then refused', async () => {
    const clock = { nowMs: Date.UTC(2030, 0, 10, 12, 6, 5) };
    const store = storeAt(clock);
    const r = rule('dead-rule');
    const grant = await store.reserveRule!(r, ask('dead', 10));
    expect(grant.granted).toBe(10);
    for (let i = 0; i < 20; i++) expect((await store.consumeRules('k-rule', wide, noBans, 1, [r])).verdict).toBe('allowed');
    const le = grant.nowMs + LEASE_MS;
    for (const advance of [0, RECALL_GRACE_MS - 1]) {
      clock.nowMs = le;
      const waits: number[] = [];
      const outcome = await store.consumeRules('k-rule', wide, noBans, 1, [r], async (_s, recall) => {
        waits.push(boundOf(recall));
        // The timer fires (a little early on Redis's clock, or a notice at once).
        clock.nowMs += advance;
      });
      expect(outcome.verdict).toBe('limited');
      expect(waits.length).toBeLessThanOrEqual(2);
      expect(waits.every((w) => w <= RECALL_GRACE_MS)).toBe(true);
    }
  });

  it('seq: a recall at a lapsed key numbers its step once; same-turn admissions carry it; the next notice is above it', async () => {
    const clock = { nowMs: Date.UTC(2030, 0, 10, 12, 7, 5) };
    const store = storeAt(clock);
    const subject = 'seq-lapsed';
    const grant = await store.reserve(subject, quota, noBans, ask('h', 10));
    for (let i = 0; i < 15; i++) await store.consume(subject, quota, noBans, 1);
    clock.nowMs = grant.nowMs + LEASE_MS + 10;
    const recalls: Recall[] = [];
    const [big, small] = await Promise.all([
      store.consume(subject, quota, noBans, 10, undefined, async (_s, r) => {
        recalls.push(r);
        await store.reserve(subject, quota, noBans, ask('h', 0, { grant, left: 10 }));
      }),
      store.consume(subject, quota, noBans, 1, undefined, async () => {}),
    ]);
    expect(recalls).toHaveLength(1);
    expect(small.verdict).toBe('allowed');
    expect(small.seq).toBe(recalls[0]!.seq);
    expect(big.verdict).toBe('allowed');
    const sq = Number(await redis.client().hget(quotaKey(subject), 'sq'));
    expect(sq).toBeGreaterThan(recalls[0]!.seq);
    expect(await redis.client().hget(quotaKey(subject), 'le')).toBe('0');
  });

  it('gcra: a recall in the grace gets the lapsed block back only while nothing was charged above it; never beyond the bound', async () => {
    const clock = { nowMs: Date.UTC(2030, 0, 10, 12, 8, 5) };
    const store = storeAt(clock);
    const g: Quota = { perMinute: 60, perDay: 1_000_000, algorithm: 'gcra', burst: 30 };
    const { intervalUs, burst } = gcraMinute(g);
    const subject = 'gcra-lapsed';
    const t0 = clock.nowMs;
    let admitted = 0;
    while ((await store.consume(subject, g, noBans, 1)).verdict === 'allowed') admitted++;
    // Refused: drains one cell a second; a block granted when it has room for 10 at t0 + 14 s.
    clock.nowMs = t0 + 14_000;
    const grant = await store.reserve(subject, g, noBans, ask('h', 10, undefined, 1));
    expect(grant.granted).toBeGreaterThan(0);
    clock.nowMs = grant.nowMs + LEASE_MS + 100;
    let recalls = 0;
    const outcome = await store.consume(subject, g, noBans, 1, undefined, async () => {
      recalls++;
      await store.reserve(subject, g, noBans, ask('h', 0, { grant, left: grant.granted, no: 1 }));
    });
    if (outcome.verdict === 'allowed') admitted++;
    while ((await store.consume(subject, g, noBans, 1)).verdict === 'allowed') admitted++;
    expect(recalls).toBe(1);
    // GCRA: at most burst - 1 + ceil(span / T) in the span since t0.
    const spanUs = (clock.nowMs - t0) * 1000;
    expect(admitted).toBeLessThanOrEqual(burst - 1 + Math.ceil(spanUs / intervalUs) + 1);
    expect(outcome.verdict).toBe('allowed');
  });

  it('credits: a recall in the grace with the holder killed ends unfunded, the balance never below zero', async () => {
    const clock = { nowMs: Date.UTC(2030, 0, 10, 12, 9, 5) };
    const store = storeAt(clock);
    const prepaid: Quota = { perMinute: 1000, perDay: 100_000, credits: 'required' };
    const subject = 'credits-lapsed';
    await store.changeCredits(subject, { set: 15 });
    const grant = await store.reserve(subject, prepaid, noBans, ask('dead', 10));
    expect(grant.granted).toBe(10);
    for (let i = 0; i < 5; i++) expect((await store.consume(subject, prepaid, noBans, 1)).verdict).toBe('allowed');
    clock.nowMs = grant.nowMs + LEASE_MS + 100;
    let recalls = 0;
    const outcome = await store.consume(subject, prepaid, noBans, 1, undefined, async () => void recalls++);
    expect({ verdict: outcome.verdict, recalls }).toEqual({ verdict: 'unfunded', recalls: 1 });
    expect((await store.changeCredits(subject, {})).after).toBe(0);
  });

  it('MULTI_QUOTA_SCRIPT: two lapsed keys recalled in one call each get their own seq and notice', async () => {
    const clock = { nowMs: Date.UTC(2030, 0, 10, 12, 10, 5) };
    const store = storeAt(clock);
    const grants = [await atLimitWithDeadHolder(store, 'multi-a'), await atLimitWithDeadHolder(store, 'multi-b')];
    clock.nowMs = Math.max(...grants.map((g) => g.nowMs)) + LEASE_MS + 10;
    const recalls: Array<[string, Recall]> = [];
    const outcomes = await Promise.all(
      ['multi-a', 'multi-b'].map((s) => store.consume(s, quota, noBans, 1, undefined, async (key, r) => void recalls.push([key, r]))),
    );
    expect(outcomes.map((o) => o.verdict)).toEqual(['limited', 'limited']);
    expect(recalls.map(([k]) => k).sort()).toEqual(['multi-a', 'multi-b']);
    for (const [key, r] of recalls) expect(Number(await redis.client().hget(quotaKey(key), 'sq'))).toBe(r.seq);
  });
});
