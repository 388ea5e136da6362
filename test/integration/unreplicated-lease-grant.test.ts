import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { UnreplicatedWrites } from '../../src/gateway/unreplicated-writes.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { redisForFile } from '../helpers/redis-for-file.js';

// quota.waitForReplica on a redis-server with no replica: every WAIT times out. A lease grant's
// units are kept and, after a reconnection, added to the master once (unreplicated-writes.ts). The
// grant admits no request by itself (a block's requests are counted at its give-back, quota-leases.ts
// rule 13), so its re-add adds units to the usage rows, and no request.

const redis = redisForFile();

const quota: Quota = { perMinute: 100, perDay: 1000 };
const ban: BanPolicy = { afterRejections: 0, window: 60, duration: 60 };

describe('an unreplicated lease grant added again after a reconnection', () => {
  it('adds its units, and counts no request admitted', async () => {
    const client = redis.server().client();
    try {
      const store = new RedisQuotaStore(client);
      const flushed: number[] = [];
      const flushedLine = ({ msg, units }: { msg: string; units: number }) => {
        if (msg === 'unreplicated quota writes added to redis') flushed.push(units);
      };
      const logger = pino(
        { level: 'info' },
        { write: (line: string) => void flushedLine(JSON.parse(line) as { msg: string; units: number }) },
      );
      const writes = new UnreplicatedWrites(store, client, logger, createMetrics());
      store.waitForReplicas({ replicas: 1, timeoutMs: 5 }, writes);
      const grant = await store.reserve('k', quota, ban, {
        want: 20,
        divisor: 1,
        minBlock: 1,
        giveBack: 0,
        giveBackMinuteStartMs: 0,
        giveBackDayStartMs: 0,
        leaseMs: 1000,
        giveBackTatUs: 0,
        holder: 'h',
        ends: false,
        heldUntilMs: 0,
      });
      expect(grant.granted).toBe(20);
      const usageKey = (await client.keys('tg:usage:{k}:*'))[0]!;
      const before = await client.hgetall(usageKey);
      const hour = Object.keys(before)
        .find((f) => f.endsWith(':u'))!
        .slice(0, -2);
      expect(before[`${hour}:u`]).toBe('20');
      expect(before[`${hour}:a`]).toBeUndefined();

      // A reconnection ('ready' again) before any WAIT was acknowledged: the units go to Redis again.
      client.disconnect(true);
      while (flushed.length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
      const after = await client.hgetall(usageKey);
      expect(flushed).toEqual([20]);
      expect(after[`${hour}:u`]).toBe('40');
      expect(after[`${hour}:a`]).toBeUndefined();
      writes.close();
    } finally {
      client.disconnect();
    }
  });
});
