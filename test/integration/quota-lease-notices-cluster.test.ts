import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { QuotaLeases, type LeaseSettings } from '../../src/quota/quota-leases.js';
import { connectRedis, whenReady, type RedisClient } from '../../src/store/redis/connect.js';
import { quotaKey } from '../../src/store/redis/redis-keys.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { pollUntil } from '../helpers/poll.js';
import { TestRedisCluster } from '../helpers/redis-cluster.js';

// Lease notices on a real 3-master Redis Cluster: the scripts PUBLISH on whichever master holds the
// key's slot, and each replica's one subscription (subscriberFor, on any one node) hears them all.

const NO_BANS: BanPolicy = { afterRejections: 1_000_000, window: 60, duration: 60 };
const SETTINGS: LeaseSettings = { leaseMs: 1000, hotPerSecond: 3, minBlock: 2, maxBlock: 50, spread: 2, replicas: 2 };
const QUOTA: Quota = { perMinute: 100_000, perDay: 1_000_000 };

let cluster: TestRedisCluster;
const clients: RedisClient[] = [];
const opened: Array<{ store: RedisQuotaStore; leases: QuotaLeases }> = [];

beforeAll(async () => {
  cluster = await TestRedisCluster.start(3);
}, 60_000);

afterAll(async () => {
  for (const { store, leases } of opened) {
    await leases.close();
    await store.close();
  }
  for (const client of clients) client.disconnect();
  await cluster?.stop();
});

/** Until `check` holds (what the replicas do in the background; 30 s at most): whether it did. */
const until = (check: () => boolean | Promise<boolean>) =>
  pollUntil(
    async () => check(),
    (done) => done,
    { deadline: Date.now() + 30_000, everyMs: 5 },
  );

async function replica(clock: { nowMs: number }) {
  const client = connectRedis({ clusterNodes: cluster.addresses }, 'gateway', 1000);
  clients.push(client);
  await whenReady(client, 10_000);
  const store = new RedisQuotaStore(client, () => clock.nowMs);
  const leases = new QuotaLeases(store, SETTINGS, () => clock.nowMs);
  opened.push({ store, leases });
  // A lease granted before the subscription took effect ends when it does (it may have missed notices).
  await store.noticesReady;
  return { store, leases };
}

describe('lease notices on a Redis Cluster', { timeout: 90_000 }, () => {
  it('a replica hears the notices of keys on every master, over its one subscription', async () => {
    const clock = { nowMs: Date.UTC(2030, 0, 10, 12, 0, 5) };
    const [a, b] = [await replica(clock), await replica(clock)];
    // Subjects until one lives on each master.
    const subjects = new Map<number, string>();
    for (let i = 0; subjects.size < 3 && i < 1000; i++) {
      const port = await cluster.masterPortOf(quotaKey(`c${i}`));
      if (!subjects.has(port)) subjects.set(port, `c${i}`);
    }
    expect(subjects.size).toBe(3);
    const reader = cluster.client();
    try {
      for (const subject of subjects.values()) {
        const leased = await until(async () => {
          if (!(await a.leases.admit(subject, QUOTA, NO_BANS, 1))) await a.store.consume(subject, QUOTA, NO_BANS, 1);
          return a.leases.held(subject) > 0;
        });
        expect(leased).toBe(true);
        const grantSeq = a.leases.lastHeard(subject)!;
        // B's decisions on Redis while A's lease may be out: each published, heard by A.
        for (let i = 0; i < 20; i++) await b.store.consume(subject, QUOTA, NO_BANS, 1);
        const seq = Number(await reader.hget(quotaKey(subject), 'sq'));
        expect(seq).toBeGreaterThan(grantSeq);
        expect(await until(() => (a.leases.lastHeard(subject) ?? 0) >= seq)).toBe(true);
      }
    } finally {
      reader.disconnect();
    }
  });
});
