import { Redis } from 'ioredis';
import { pollFor } from '../helpers/poll.js';
import { afterEach, describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { QuotaLeases, RECALL_GRACE_MS, type LeaseSettings } from '../../src/quota/quota-leases.js';
import type { QuotaOutcome } from '../../src/quota/quota-state.js';
import { windowsOf } from '../../src/quota/rate-limit-headers.js';
import { QUOTA_NOTICE_CHANNEL, quotaKey } from '../../src/store/redis/redis-keys.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { redisForFile } from '../helpers/redis-for-file.js';

// Lease notices (rule 10 of src/quota/quota-leases.ts) on a real redis-server, with each replica's
// own subscription and one injected clock: while a lease may be out, every change of the key's
// counts is published, so a replica's headers see what the others took since its grant, and a ban
// counted on another replica ends its lease at once.

const redis = redisForFile();

const NO_BANS: BanPolicy = { afterRejections: 1_000_000, window: 60, duration: 60 };
const SETTINGS: LeaseSettings = { leaseMs: 1000, hotPerSecond: 3, minBlock: 2, maxBlock: 50, spread: 2, replicas: 2 };
const QUOTA: Quota = { perMinute: 1000, perDay: 1_000_000 };

const opened: Array<{ store: RedisQuotaStore; leases: QuotaLeases }> = [];

afterEach(async () => {
  for (const { store, leases } of opened.splice(0)) {
    await leases.close();
    await store.close();
  }
});

/** A replica: its own store (and subscription, unless `deaf`) and leases, on the shared clock. */
async function replica(clock: { nowMs: number }, deaf = false) {
  const store = new RedisQuotaStore(redis.client(), () => clock.nowMs);
  const reserving = deaf ? { reserve: store.reserve.bind(store) } : store;
  const leases = new QuotaLeases(reserving, SETTINGS, () => clock.nowMs);
  opened.push({ store, leases });
  // A lease granted before the subscription took effect ends when it does (it may have missed notices).
  await store.noticesReady;
  return { store, leases };
}

type Replica = Awaited<ReturnType<typeof replica>>;

/** One request: from the lease when it can, else decided by Redis, as the gateway does. */
async function send(r: Replica, subject: string, quota = QUOTA, ban = NO_BANS): Promise<QuotaOutcome & { leased: boolean }> {
  const leased = await r.leases.admit(subject, quota, ban, 1);
  if (leased) return { ...leased, leased: true };
  return { ...(await r.store.consume(subject, quota, ban, 1)), leased: false };
}

/** Requests until the replica holds a lease of `subject` (its reservation runs in the background). */
async function hotUntilLeased(r: Replica, subject: string, admitted: { units: number }): Promise<void> {
  await pollFor(async () => {
    const outcome = await send(r, subject);
    if (outcome.verdict === 'allowed') admitted.units++;
    return r.leases.held(subject) > 0;
  }, 'a lease');
}

/** The notice sequence number Redis holds for the key: every notice up to it has been published. */
async function publishedSeq(subject: string): Promise<number> {
  return Number(await redis.client().hget(quotaKey(subject), 'sq'));
}

function minuteRemaining(outcome: QuotaOutcome): number {
  return windowsOf(QUOTA, outcome).find((w) => w.name === 'minute')!.remaining;
}

describe('lease notices', { timeout: 60_000 }, () => {
  it("a leased request's remaining sees what other replicas admitted since its grant, and under-reports by at most their leases", async () => {
    const clock = { nowMs: Date.UTC(2030, 0, 10, 12, 0, 5) };
    const subject = 'notice-headers';
    const [a, b, deaf] = [await replica(clock), await replica(clock), await replica(clock, true)];
    const admitted = { units: 0 };
    await hotUntilLeased(a, subject, admitted);
    await hotUntilLeased(deaf, subject, admitted);
    // B takes blocks again and again after A's grant, and uses them.
    for (let i = 0; i < 400; i++) {
      const outcome = await send(b, subject);
      if (outcome.verdict === 'allowed') admitted.units++;
      if (i % 20 === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    expect(admitted.units).toBeGreaterThan(400);
    // Every notice published so far has reached A.
    const seq = await publishedSeq(subject);
    await pollFor(() => (a.leases.lastHeard(subject) ?? 0) >= seq, "A's notices");

    const outcome = await send(a, subject);
    expect(outcome.leased).toBe(true);
    admitted.units++;
    const trulyLeft = QUOTA.perMinute - admitted.units;
    expect(minuteRemaining(outcome)).toBeLessThanOrEqual(trulyLeft);
    expect(minuteRemaining(outcome)).toBeGreaterThanOrEqual(trulyLeft - b.leases.held(subject) - deaf.leases.held(subject));

    // A replica that hears no notices still reports what was left at its own grant: more than is left.
    const stale = await send(deaf, subject);
    expect(stale.leased).toBe(true);
    admitted.units++;
    expect(minuteRemaining(stale)).toBeGreaterThan(QUOTA.perMinute - admitted.units);
  });

  it("a lease hears the notices that follow the loss of the key's state in Redis (FLUSHDB, eviction, DEL)", async () => {
    const clock = { nowMs: Date.UTC(2030, 0, 10, 12, 3, 5) };
    const subject = 'notice-state-lost';
    const quota: Quota = { perMinute: 100_000, perDay: 1_000_000 };
    const [a, b] = [await replica(clock), await replica(clock)];
    await pollFor(async () => {
      await send(a, subject, quota);
      return a.leases.held(subject) > 0;
    }, 'a lease');
    // Many changes (each a notice A hears) before the state is lost: A's number grows.
    for (let i = 0; i < 200; i++) await b.store.consume(subject, quota, NO_BANS, 1);
    const seqBefore = await publishedSeq(subject);
    await pollFor(() => (a.leases.lastHeard(subject) ?? 0) >= seqBefore, "A's notices");

    await redis.client().del(quotaKey(subject));
    clock.nowMs += 1;
    // Redis counts from zero again; B takes blocks and uses them, more than A last heard of.
    const afterLoss = { units: 0 };
    for (let i = 0; i < 600; i++) {
      const outcome = await send(b, subject, quota);
      if (outcome.verdict === 'allowed') afterLoss.units++;
      if (i % 20 === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    const seq = await publishedSeq(subject);
    await pollFor(() => (a.leases.lastHeard(subject) ?? 0) >= seq, "A's notices after the loss");
    const outcome = await send(a, subject, quota);
    expect(outcome.leased).toBe(true);
    afterLoss.units++;
    // What Redis still counts as admitted: A's headers report no more than is left of that.
    const left = quota.perMinute - afterLoss.units;
    expect(windowsOf(quota, outcome).find((w) => w.name === 'minute')!.remaining).toBeLessThanOrEqual(left);
  });

  it("decides every request of a leased key for a Redis user that may not publish on the notices' channel", async () => {
    // A user with the channel permissions tollgate needed before lease notices (Redis ACLs).
    await redis.client().call('ACL', 'SETUSER', 'no-notices', 'on', 'nopass', '~*', '+@all', 'resetchannels', '&tg:invalidate');
    const client = new Redis(redis.server().url, { username: 'no-notices', password: 'any', maxRetriesPerRequest: 1 });
    let store: RedisQuotaStore | undefined;
    let leases: QuotaLeases | undefined;
    try {
      const clock = { nowMs: Date.UTC(2030, 0, 10, 12, 4, 5) };
      const subject = 'notice-not-allowed';
      const own = (store = new RedisQuotaStore(client, () => clock.nowMs));
      const leased = (leases = new QuotaLeases(own, SETTINGS, () => clock.nowMs));
      // The grant's step and Redis's decisions beside the lease publish: each still answers.
      await pollFor(async () => {
        const admitted = await leased.admit(subject, QUOTA, NO_BANS, 1);
        if (!admitted) expect((await own.consume(subject, QUOTA, NO_BANS, 1)).verdict).toBe('allowed');
        return leased.held(subject) > 0;
      }, 'a lease');
      expect((await own.consume(subject, QUOTA, NO_BANS, 1)).verdict).toBe('allowed');
    } finally {
      // Closed before their connection is: the lease's give-back and the store's last calls need it.
      await leases?.close();
      await store?.close();
      client.disconnect();
    }
  });

  it('a ban counted on another replica ends a lease at once', async () => {
    const clock = { nowMs: Date.UTC(2030, 0, 10, 12, 1, 5) };
    const subject = 'notice-ban';
    const quota: Quota = { perMinute: 60, perDay: 1_000_000 };
    const ban: BanPolicy = { afterRejections: 3, window: 60, duration: 600 };
    const [a, b] = [await replica(clock), await replica(clock)];
    await pollFor(async () => {
      await send(a, subject, quota, ban);
      return a.leases.held(subject) > 0;
    }, 'a lease');
    // B spends the rest of the minute (A's block is counted) and is refused into a ban.
    let banned = false;
    for (let i = 0; i < 100 && !banned; i++) banned = (await send(b, subject, quota, ban)).verdict === 'banned';
    expect(banned).toBe(true);
    // The clock stands still: only the ban's notice can end A's lease.
    await pollFor(() => a.leases.held(subject) === 0, "the end of A's lease");
    const next = await send(a, subject, quota, ban);
    expect(next.leased).toBe(false);
    expect(next.verdict).toBe('banned');
  });

  for (const [when, pastEndMs, published] of [
    ['within the grace after the end of its lease (a recalled request may wait for it)', RECALL_GRACE_MS - 1, true],
    ['once the grace after every lease of the key has passed', RECALL_GRACE_MS, false],
  ] as const) {
    it(`publishes a give-back that comes ${when}: ${published ? 'announced' : 'unannounced'}`, async () => {
      const clock = { nowMs: Date.UTC(2030, 0, 10, 12, 5, 5) };
      const subject = `notice-late-give-back-${pastEndMs}`;
      const a = await replica(clock);
      await hotUntilLeased(a, subject, { units: 0 });
      const held = a.leases.held(subject);
      const dayCount = async () => Number(await redis.client().hget(quotaKey(subject), 'dc'));
      const [seq, counted] = [await publishedSeq(subject), await dayCount()];
      // Past the lease's life on Redis's clock, as when a sweep finds it ended: the units come back.
      clock.nowMs += SETTINGS.leaseMs + pastEndMs;
      await a.leases.close();
      expect(await dayCount()).toBe(counted - held);
      if (published) expect(await publishedSeq(subject)).toBeGreaterThan(seq);
      else expect(await publishedSeq(subject)).toBe(seq);
    });
  }

  it('publishes nothing for a key no lease may be out for: cold keys, and leased keys once their leases have lapsed', async () => {
    const clock = { nowMs: Date.UTC(2030, 0, 10, 12, 2, 5) };
    const listener = redis.client().duplicate();
    const heard: Array<{ key: string; seq: number }> = [];
    listener.on('message', (_channel: string, message: string) => {
      const [key, seq] = message.split(' ');
      heard.push({ key: key!, seq: Number(seq) });
    });
    await listener.subscribe(QUOTA_NOTICE_CHANNEL);
    try {
      const { store } = await replica(clock);
      for (let i = 0; i < 50; i++) await store.consume('notice-cold', QUOTA, NO_BANS, 1);

      const a = await replica(clock);
      await hotUntilLeased(a, 'notice-lapsed', { units: 0 });
      await a.leases.close();
      // Past the lease's life on Redis's clock: Redis's own decisions publish nothing again.
      clock.nowMs += SETTINGS.leaseMs;
      const before = await publishedSeq('notice-lapsed');
      for (let i = 0; i < 20; i++) await store.consume('notice-lapsed', QUOTA, NO_BANS, 1);
      expect(await publishedSeq('notice-lapsed')).toBe(before);

      // Every published notice has arrived once a later publication has (one connection, in order).
      await redis.client().publish(QUOTA_NOTICE_CHANNEL, 'end');
      await pollFor(() => heard.some(({ key }) => key === 'end'), 'the marker');
      expect(heard.filter(({ key }) => key === quotaKey('notice-cold'))).toEqual([]);
      // Each change published once, in order (one apart while the clock stands still), the last the one Redis holds.
      const lapsed = heard.filter(({ key }) => key === quotaKey('notice-lapsed')).map(({ seq }) => seq);
      expect(lapsed.length).toBeGreaterThan(1);
      expect(lapsed.every((seq, i) => i === 0 || seq === lapsed[i - 1]! + 1)).toBe(true);
      expect(lapsed.at(-1)).toBe(before);
    } finally {
      listener.disconnect();
    }
  });

  // Last: it restarts the file's Redis.
  it('a Redis restarted empty ends every lease, once the subscription is back (notices may have been missed)', async () => {
    const clock = { nowMs: Date.UTC(2030, 0, 10, 12, 6, 5) };
    const subject = 'notice-restart';
    const a = await replica(clock);
    await hotUntilLeased(a, subject, { units: 0 });
    await redis.server().kill();
    await redis.server().launch();
    // The clock stands still: only the subscription's gap can end the lease.
    await pollFor(() => a.leases.held(subject) === 0, 'the end of the lease');
  });
});
