import { expect } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { QuotaLeases, type LeaseSettings } from '../../src/quota/quota-leases.js';
import { connectRedis, whenReady, type RedisClient } from '../../src/store/redis/connect.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';

// Replicas of the quota step in the test's process: each a RedisQuotaStore on a connection of its
// own (a gateway's options: fail fast, 250 ms timeout) with its QuotaLeases, all on one injected
// clock (Redis's and theirs), without notices: for tests of what Redis counts.

export const NO_BANS: BanPolicy = { afterRejections: 1_000_000, window: 60, duration: 60 };
export const SETTINGS: LeaseSettings = { leaseMs: 200, hotPerSecond: 5, minBlock: 2, maxBlock: 40, spread: 1, replicas: 2 };

export interface Replica {
  store: RedisQuotaStore;
  leases: QuotaLeases;
  client: RedisClient;
}

export function leaseReplicas(clock: { nowMs: number }) {
  const opened: Replica[] = [];
  return {
    async open(url: string): Promise<Replica> {
      const client = connectRedis(url, 'gateway', 250);
      client.on('error', () => undefined); // the faults are the test's own
      await whenReady(client, 10_000);
      const store = new RedisQuotaStore(client, () => clock.nowMs);
      const leases = new QuotaLeases({ reserve: store.reserve.bind(store) }, SETTINGS, () => clock.nowMs);
      const replica = { store, leases, client };
      opened.push(replica);
      return replica;
    },
    async closeAll(): Promise<void> {
      for (const { leases, client } of opened.splice(0)) {
        await leases.close();
        client.disconnect();
      }
    },
    /** Requests of `subject` on a replica, 10 ms apart, until it holds a lease; the units admitted. */
    async untilLeased(r: Replica, subject: string, quota: Quota): Promise<number> {
      let admitted = 0;
      for (let i = 0; i < 200 && r.leases.held(subject) === 0; i++) {
        clock.nowMs += 10;
        const outcome = (await r.leases.admit(subject, quota, NO_BANS, 1)) ?? (await r.store.consume(subject, quota, NO_BANS, 1));
        if (outcome.verdict === 'allowed') admitted++;
      }
      expect(r.leases.held(subject)).toBeGreaterThan(0);
      return admitted;
    },
  };
}
