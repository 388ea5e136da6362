import { afterEach, describe, expect, it } from 'vitest';
import { leaseRequest } from '../helpers/lease-requests.js';
import { pollFor } from '../helpers/poll.js';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { QuotaLeases, type LeaseSettings } from '../../src/quota/quota-leases.js';
import { leaseHoldersKey, quotaKey } from '../../src/store/redis/redis-keys.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import type { LeaseRequest } from '../../src/store/quota-store.js';
import { redisForFile } from '../helpers/redis-for-file.js';

// Second reviewer's attacks on warm keys (4f5866a) and its mends (590c2da, f276ea9, 20ba45b). Real
// redis-server of the file's own, replicas as QuotaLeases on RedisQuotaStores, all three clocks
// (store, monotonic, wall) one injected clock.

const redis = redisForFile();

const NO_BANS: BanPolicy = { afterRejections: 1_000_000, window: 60, duration: 60 };
const SETTINGS: LeaseSettings = { leaseMs: 1000, hotPerSecond: 50, minBlock: 2, maxBlock: 2000, spread: 1, replicas: 2, warmKeys: true };

const opened: Array<{ store: RedisQuotaStore; leases?: QuotaLeases }> = [];

afterEach(async () => {
  for (const { store, leases } of opened.splice(0)) {
    await leases?.close();
    await store.close();
  }
});

/** A replica on the shared clock; `giveBackDelayMs`: a live holder slow to give back (a loaded machine). */
async function replica(clock: { nowMs: number }, giveBackDelayMs = 0) {
  const store = new RedisQuotaStore(redis.client(), () => clock.nowMs);
  const reserving = {
    reserve: async (id: string, quota: Quota, ban: BanPolicy, request: LeaseRequest) => {
      if (request.want === 0 && giveBackDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, giveBackDelayMs));
      return store.reserve(id, quota, ban, request);
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

describe('attacks on warm key leases, second review', { timeout: 60_000 }, () => {
  // f276ea9: after a recall whose bound ended unheard (a killed warm holder), later recalls of the
  // key "with no newer 'le'" resolve at once. The test is `recall.leasedUntilMs <= silent's`: it
  // takes a lower 'le' for an older one. But 'le' falls below the killed holder's end when the
  // key's state is lost (a Redis restarted empty or failed over, a FLUSHDB, the hash evicted under
  // maxmemory): 'le' and 'rq' are gone, a live replica is granted a hot lease at once, its 'le'
  // (grant + leaseMs) below the dead warm lease's (its minute's end). A refusal of the key's burst
  // at the limit is then a recall of that live lease, resolved at once, without waiting for its
  // units, which come back a few ms later: the burst is under-admitted by the live block.
  it("a recall of a live lease granted after the key's state was lost waits for its units", async () => {
    const M = Date.UTC(2030, 0, 10, 12, 2);
    const clock = { nowMs: M + 10_000 };
    const subject = 'warm-silent-after-reset';
    const quota: Quota = { perMinute: 200, perDay: 1_000_000 };
    const store = new RedisQuotaStore(redis.client(), () => clock.nowMs);
    opened.push({ store });
    // A killed replica's warm grant: 10 units living 50 s (to the minute's end); it never answers.
    const grant = await store.reserve(subject, quota, NO_BANS, leaseRequest({ want: 10, leaseMs: 50_000, block: 1, holder: 'killed' }));
    expect(grant.granted).toBe(10);
    for (let i = 0; i < 190; i++) expect((await store.consume(subject, quota, NO_BANS, 1)).verdict).toBe('allowed');
    const live = await replica(clock);
    const consume = () =>
      live.store.consume(subject, quota, NO_BANS, 1, undefined, async (id, recall) => void (await live.leases.recalled(id, recall)));
    // The first refusal waits the bound, unheard: the live replica marks the key silent.
    expect((await consume()).verdict).toBe('limited');

    // The key's state is lost (a Redis restarted empty, a failover, eviction): a new count.
    await redis.client().del(quotaKey(subject), leaseHoldersKey(subject));
    // B, alive (a little slow to give back: 100 ms), makes the key hot and takes a lease.
    const b = await replica(clock, 100);
    let admitted = 0;
    for (let i = 0; i < 60 && b.leases.held(subject) === 0; i++) {
      const leased = await b.leases.admit(subject, quota, NO_BANS, 1);
      const outcome = leased ?? (await b.store.consume(subject, quota, NO_BANS, 1));
      if (outcome.verdict === 'allowed') admitted++;
      await new Promise((resolve) => setImmediate(resolve));
    }
    await pollFor(() => b.leases.held(subject) > 0, "B's lease");
    expect(b.leases.held(subject)).toBeGreaterThan(10);
    // A burst at the limit on the live replica: B's units are recalled, and come back.
    for (let i = 0; i < 400; i++) {
      const outcome = await consume();
      if (outcome.verdict !== 'allowed') break;
      admitted++;
    }
    expect(admitted).toBe(quota.perMinute); // measured: 200 less B's block
  });
});
