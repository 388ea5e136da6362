import { describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { QuotaLeases, type LeaseSettings } from '../../src/quota/quota-leases.js';
import type { LeaseGrant, LeaseRequest } from '../../src/store/quota-store.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { redisForFile } from '../helpers/redis-for-file.js';

// Edges of the lease life (src/quota/quota-leases.ts) on a real redis-server and an injected
// clock: a reservation still on its way at shutdown, requests that no block can cover, and a
// give-back to a Redis that lost the key's state since the grant.

const redis = redisForFile();

const NO_BANS: BanPolicy = { afterRejections: 1_000_000, window: 60, duration: 60 };
const SETTINGS: LeaseSettings = { leaseMs: 1000, hotPerSecond: 5, minBlock: 2, maxBlock: 40, spread: 2, replicas: 1 };
const FIXED: Quota = { perMinute: 10_000, perDay: 1_000_000 };

function replica(clock: { nowMs: number }) {
  const store = new RedisQuotaStore(redis.client(), () => clock.nowMs);
  const asked = { reservations: 0 };
  let arrived!: () => void;
  const granted = new Promise<void>((resolve) => (arrived = resolve));
  const counted = {
    reserve: async (id: string, quota: Quota, ban: BanPolicy, request: LeaseRequest): Promise<LeaseGrant> => {
      if (request.want > 0) asked.reservations++;
      const grant = await store.reserve(id, quota, ban, request);
      if (request.want > 0) arrived();
      return grant;
    },
  };
  return { store, asked, granted, leases: new QuotaLeases(counted, SETTINGS, () => clock.nowMs) };
}

describe('quota lease edges', () => {
  it('gives back at shutdown a block whose reservation was still on its way', async () => {
    const clock = { nowMs: Date.UTC(2030, 0, 10, 12, 0, 5) };
    const { store, asked, granted, leases } = replica(clock);
    // A hot key: the fifth unit in a second asks for a block, in the background.
    for (let i = 0; i < 5; i++) expect(leases.admit('edge-close', FIXED, NO_BANS, 1)).toBeUndefined();
    expect(asked.reservations).toBe(1);
    // Shutdown starts before the block arrives.
    const closing = leases.close();
    await granted;
    await closing;
    const usage = await store.usage('edge-close');
    expect(usage.minuteCount).toBe(0);
    expect(usage.dayCount).toBe(0);
    expect(leases.held('edge-close')).toBe(0);
  });

  it('asks for no block for requests that cost more than any block may hold', async () => {
    const clock = { nowMs: Date.UTC(2030, 0, 10, 12, 1, 5) };
    const { store, asked, leases } = replica(clock);
    const cost = SETTINGS.maxBlock + 10;
    for (let i = 0; i < 40; i++) {
      clock.nowMs += 10;
      if ((await leases.admit('edge-cost', FIXED, NO_BANS, cost)) === undefined) await store.consume('edge-cost', FIXED, NO_BANS, cost);
      await new Promise((resolve) => setImmediate(resolve));
    }
    // Every one of these requests is decided by Redis: a block would only be a command more, and
    // units held back from them.
    expect(asked.reservations).toBe(0);
    await leases.close();
    expect((await store.usage('edge-cost')).minuteCount).toBe(40 * cost);
  });
});

describe('quota lease give-back after Redis lost the state', () => {
  it('credits no window with units it never counted', async () => {
    const clock = { nowMs: Date.UTC(2030, 0, 10, 12, 2, 5) };
    const quota: Quota = { perMinute: 100, perDay: 1_000_000 };
    const { store, granted, leases } = replica(clock);
    for (let i = 0; i < 6; i++) void leases.admit('edge-lost', quota, NO_BANS, 1);
    await granted;
    await new Promise((resolve) => setImmediate(resolve));
    const held = leases.held('edge-lost');
    expect(held).toBeGreaterThan(0);
    // Redis restarts empty (no persistence); the key's requests go on in the same minute.
    await redis.client().flushall();
    let admitted = 0;
    for (let i = 0; i < 100; i++) {
      if ((await store.consume('edge-lost', quota, NO_BANS, 1)).verdict === 'allowed') admitted++;
    }
    expect(admitted).toBe(100);
    // The lease ends (its key changed, say) and gives back units the new counters never held.
    leases.forget('edge-lost');
    await leases.close();
    for (let i = 0; i < 100; i++) {
      if ((await store.consume('edge-lost', quota, NO_BANS, 1)).verdict === 'allowed') admitted++;
    }
    // Since the restart, this minute has counted from zero: never more than its limit.
    expect(admitted).toBe(100);
  });
});
