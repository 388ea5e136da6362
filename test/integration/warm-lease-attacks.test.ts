import { afterEach, describe, expect, it } from 'vitest';
import { leaseRequest } from '../helpers/lease-requests.js';
import { pollFor } from '../helpers/poll.js';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { QuotaLeases, type LeaseSettings } from '../../src/quota/quota-leases.js';
import type { QuotaOutcome } from '../../src/quota/quota-state.js';
import { windowsOf } from '../../src/quota/rate-limit-headers.js';
import { quotaKey } from '../../src/store/redis/redis-keys.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import type { LeaseRequest } from '../../src/store/quota-store.js';
import { redisForFile } from '../helpers/redis-for-file.js';

// Reviewer's attacks on 4f5866a (warm keys take leases until their minute's end, rule 15 of
// src/quota/quota-leases.ts). Real redis-server of the file's own, replicas as QuotaLeases on
// RedisQuotaStores, all three clocks (store, monotonic, wall) one injected clock.

const redis = redisForFile();

const NO_BANS: BanPolicy = { afterRejections: 1_000_000, window: 60, duration: 60 };
const SETTINGS: LeaseSettings = { leaseMs: 1000, hotPerSecond: 50, minBlock: 2, maxBlock: 2000, spread: 1, replicas: 2, warmKeys: true };
const QUOTA: Quota = { perMinute: 1000, perDay: 1_000_000 };

const opened: Array<{ store: RedisQuotaStore; leases: QuotaLeases }> = [];

afterEach(async () => {
  for (const { store, leases } of opened.splice(0)) {
    await leases.close();
    await store.close();
  }
});

/**
 * A replica on the shared clock. `lose.next` true: its next lease ask runs in Redis, and its answer
 * is lost (a timeout, a cut connection: the replica sees an error).
 */
async function replica(clock: { nowMs: number }, lose = { next: false }) {
  const store = new RedisQuotaStore(redis.client(), () => clock.nowMs);
  const reserving = {
    reserve: async (id: string, quota: Quota, ban: BanPolicy, request: LeaseRequest) => {
      const losing = lose.next && request.want > 0;
      if (losing) lose.next = false;
      const grant = await store.reserve(id, quota, ban, request);
      if (losing) throw new Error('Command timed out');
      return grant;
    },
    notices: store.notices.bind(store),
  };
  const leases = new QuotaLeases(
    reserving,
    SETTINGS,
    () => clock.nowMs,
    () => clock.nowMs,
  );
  opened.push({ store, leases });
  await store.noticesReady;
  return { store, leases };
}

type Replica = Awaited<ReturnType<typeof replica>>;

async function send(r: Replica, subject: string): Promise<QuotaOutcome & { leased: boolean }> {
  const leased = await r.leases.admit(subject, QUOTA, NO_BANS, 1);
  if (leased) return { ...leased, leased: true };
  return { ...(await r.store.consume(subject, QUOTA, NO_BANS, 1)), leased: false };
}

const minuteRemaining = (outcome: QuotaOutcome) => windowsOf(QUOTA, outcome).find((w) => w.name === 'minute')!.remaining;

describe('attacks on warm key leases (4f5866a)', { timeout: 60_000 }, () => {
  // A warm lease admits until its minute's end; its renewal near that end (under 5 s left, or the
  // key turned hot) is a hot ask, whose grant makes this holder's end in Redis grant time +
  // leaseMs: seconds before the lease it renews stops admitting. When that renewal's answer is
  // lost the lease goes on admitting to the minute's end, but Redis drops the holder at its
  // (shorter) end + the grace: 'le' falls to 0 under a lease still out, so notices stop (its
  // headers go above the truth) and refusals recall nothing.
  it("a lost hot renewal of a warm lease leaves Redis's 'le' covering the lease it renewed", async () => {
    const M = Date.UTC(2030, 0, 10, 12, 0);
    const clock = { nowMs: M + 5_000 };
    const subject = 'warm-lost-renewal';
    const lose = { next: false };
    const a = await replica(clock, lose);
    const b = await replica(clock);
    // A sees the key 5 a second for 5 s: a warm lease until the minute's end.
    for (let i = 0; i < 26; i++) {
      await send(a, subject);
      clock.nowMs += 200;
    }
    await send(a, subject);
    await pollFor(() => a.leases.held(subject) > 0, 'a warm lease');
    const block = a.leases.held(subject);
    expect(block).toBeGreaterThan(100);
    // 4 s of the minute left: A uses half its block; the renewal (hot: too little of the minute
    // left for a warm one) runs in Redis, its answer lost.
    clock.nowMs = M + 56_000;
    lose.next = true;
    for (let used = 0; used < block / 2 + 1; used++) expect((await send(a, subject)).leased).toBe(true);
    await pollFor(() => !lose.next, 'the renewal');
    await new Promise((resolve) => setTimeout(resolve, 50));
    // B takes a hot lease and ends it (any holder's end recomputes 'le' from the holders left).
    clock.nowMs = M + 57_600;
    for (let i = 0; i < 60 && b.leases.held(subject) === 0; i++) {
      await send(b, subject);
      await new Promise((resolve) => setImmediate(resolve));
    }
    await pollFor(() => b.leases.held(subject) > 0, "B's lease");
    b.leases.forget(subject);
    await new Promise((resolve) => setTimeout(resolve, 200));

    // Wherever A's lease may still admit, Redis must count its units out: 'le' after now.
    clock.nowMs = M + 58_000;
    // (A's sweep, every tenth of leaseMs, ends what has ended by now.)
    await new Promise((resolve) => setTimeout(resolve, 150));
    const le = Number(await redis.client().hget(quotaKey(subject), 'le'));
    const admitting = a.leases.held(subject) > 0;
    expect({ admitting, leCoversIt: !admitting || le > clock.nowMs }).toMatchObject({ leCoversIt: true }); // measured: admitting, le 0

    // What follows from it: B's admissions are published to nobody, and A's headers go above the truth.
    for (let i = 0; i < 20; i++) expect((await b.store.consume(subject, QUOTA, NO_BANS, 1)).verdict).toBe('allowed');
    await new Promise((resolve) => setTimeout(resolve, 50));
    const outcome = await send(a, subject);
    const told = outcome.leased ? outcome : a.leases.told(subject, outcome);
    const counted = Number(await redis.client().hget(quotaKey(subject), 'mc'));
    const trulyLeft = QUOTA.perMinute - (counted - a.leases.held(subject));
    expect(minuteRemaining(told)).toBeLessThanOrEqual(trulyLeft); // measured 617 > 597
  });

  // A warm lease's holder killed with `kill -9` (or deaf) keeps Redis's 'le' up to its minute's end,
  // so every refusal of the key until then is a recall, and each waits the capped bound (leaseMs +
  // the grace, 1.5 s) for a holder that never answers: not one burst's refusal, as after a hot
  // holder's end (≤ leaseMs), but every 429 of the key for up to a minute, on every replica, each
  // holding its connection and a pending decision (maxPendingDecisions) 1.5 s. No grant can come
  // meanwhile ('rq' is that 'le'), so after one unanswered recall the same holders are all a later
  // one could wait for: it need not wait again.
  it('after a recall unanswered by a killed warm holder, later refusals until its end are not held the bound again', async () => {
    const M = Date.UTC(2030, 0, 10, 12, 1);
    const clock = { nowMs: M + 10_000 };
    const subject = 'warm-killed-holder';
    const quota: Quota = { perMinute: 30, perDay: 1_000_000 };
    const store = new RedisQuotaStore(redis.client(), () => clock.nowMs);
    // The killed replica's warm grant: 10 units, living 50 s (to the minute's end); it never answers.
    const grant = await store.reserve(subject, quota, NO_BANS, leaseRequest({ want: 10, leaseMs: 50_000, block: 1, holder: 'killed' }));
    expect(grant.granted).toBe(10);
    for (let i = 0; i < 20; i++) expect((await store.consume(subject, quota, NO_BANS, 1)).verdict).toBe('allowed');
    // A live replica decides the key's requests, waiting on its recalls as the gateway does.
    const live = await replica(clock);
    const refusal = async () => {
      const startedMs = performance.now();
      const outcome = await live.store.consume(
        subject,
        quota,
        NO_BANS,
        1,
        undefined,
        async (id, recall) => void (await live.leases.recalled(id, recall)),
      );
      expect(outcome.verdict).toBe('limited');
      return performance.now() - startedMs;
    };
    // The first waits the bound: the holder might have answered.
    expect(await refusal()).toBeGreaterThanOrEqual(SETTINGS.leaseMs + 400);
    // Later ones, seconds later, still long before the dead lease's end: nothing new to wait for.
    const waits: number[] = [];
    for (let i = 0; i < 3; i++) {
      clock.nowMs += 5_000;
      waits.push(await refusal());
    }
    expect(Math.max(...waits)).toBeLessThan(500); // measured about 1500 each
  });
});
