import { once } from 'node:events';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { UnreplicatedWrites } from '../../src/gateway/unreplicated-writes.js';
import { createMetrics } from '../../src/observability/metrics.js';
import type { RedisClient } from '../../src/store/redis/connect.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { redisForFile } from '../helpers/redis-for-file.js';

// quota.waitForReplica on a redis-server with no replica: every WAIT times out. A lease grant's
// units are kept and, after a reconnection, added to a master that lacks them once
// (unreplicated-writes.ts; the same master holds them, and gets nothing). The grant admits no
// request by itself (a block's requests are counted at its give-back, quota-leases.ts rule 13), so
// its re-add adds units to the usage rows, and no request; a credits key's block also takes its
// credits from the balance again, and holds them out on the block ('lc') for its give-back.

const redis = redisForFile();

const quota: Quota = { perMinute: 100, perDay: 1000, credits: 'required' };
const ban: BanPolicy = { afterRejections: 0, window: 60, duration: 60 };

const lease = {
  want: 20,
  divisor: 1,
  minBlock: 1,
  giveBack: 0,
  giveBackMinuteStartMs: 0,
  giveBackDayStartMs: 0,
  leaseMs: 1000,
  holder: 'h',
  ends: false,
  heldUntilMs: 0,
};

/** Waits for what the store does on its own after a reconnection (a generous deadline, not a timing). */
async function until(done: () => boolean): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!done()) {
    if (Date.now() > deadline) throw new Error('not within 60 s');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * A store on `client` with quota.waitForReplica (every WAIT times out: no replica) and the
 * listener's log lines kept: `logged(msg, field)` lists that field of each line `msg` so far.
 * Connected before its first turn, as the gateway is (it serves once Redis answers, and queues
 * nothing while disconnected): a turn's marker names the connection it went out on.
 */
async function waitingStore(client: RedisClient) {
  await client.ping();
  const store = new RedisQuotaStore(client);
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  const writes = new UnreplicatedWrites(store, client, logger, createMetrics());
  store.waitForReplicas({ replicas: 1, timeoutMs: 5 }, writes);
  const logged = (msg: string, field: string) => lines.filter((line) => line.msg === msg).map((line) => line[field] as number);
  return { store, writes, logged };
}

describe('an unreplicated lease grant added again after a reconnection', () => {
  it('adds its units and credits to a master that lacks it, and counts no request admitted', async () => {
    const client = redis.server().client();
    try {
      const { store, writes, logged } = await waitingStore(client);
      const flushed = () => logged('unreplicated quota writes added to redis', 'units');
      const checked = () => logged('unreplicated quota writes checked on redis', 'held');
      await store.changeCredits('k', { set: 100 });
      const grant = await store.reserve('k', quota, ban, lease);
      expect(grant.granted).toBe(20);
      const usageKey = (await client.keys('tg:usage:{k}:*'))[0]!;
      const before = await client.hgetall(usageKey);
      const hour = Object.keys(before)
        .find((f) => f.endsWith(':u'))!
        .slice(0, -2);
      expect(before[`${hour}:u`]).toBe('20');
      expect(before[`${hour}:a`]).toBeUndefined();

      // A reconnection to the same master: it holds the grant (its marker says so), nothing is added.
      client.disconnect(true);
      await until(() => checked().length > 0);
      expect(checked()).toEqual([1]);
      expect(flushed()).toEqual([]);
      expect((await client.hgetall(usageKey))[`${hour}:u`]).toBe('20');

      // Another grant, and a master that lacks it (its marker gone, as on a replica promoted before
      // the grant reached it): the units and credits go to Redis again, once.
      const again = await store.reserve('k', quota, ban, { ...lease, holder: 'h2' });
      expect(again.granted).toBe(20);
      await client.del(...(await client.keys('tg:applied:*')));
      client.disconnect(true);
      await until(() => flushed().length > 0);
      const after = await client.hgetall(usageKey);
      expect(flushed()).toEqual([20]);
      expect(after[`${hour}:u`]).toBe('60');
      expect(after[`${hour}:c`]).toBe('60');
      expect(after[`${hour}:a`]).toBeUndefined();
      expect(await client.hmget('tg:quota:{k}', 'cb', 'lc')).toEqual(['40', '60']);
      writes.close();
    } finally {
      client.disconnect();
    }
  });

  it("lets a re-added grant's give-back return its unused units on a master that lacked the grant", async () => {
    const client = redis.server().client();
    try {
      const { store, writes, logged } = await waitingStore(client);
      const flushed = () => logged('unreplicated quota writes added to redis', 'units');
      const plain: Quota = { perMinute: 100, perDay: 1000 };
      // A first lease, given back whole: the key has had leases ('he' set), as a busy key has.
      const first = await store.reserve('r', plain, ban, lease);
      const backWhole = {
        ...lease,
        want: 0,
        ends: true,
        giveBack: first.granted,
        giveBackMinuteStartMs: first.minuteStartMs,
        giveBackDayStartMs: first.dayStartMs,
        heldUntilMs: first.nowMs + lease.leaseMs,
        giveBackNo: 1,
        giveBackHashEpoch: first.hashEpoch,
      };
      await store.reserve('r', plain, ban, backWhole);
      const promoted = await client.hgetall('tg:quota:{r}');
      expect(promoted.dc).toBe('0');
      const [marker] = await client.keys('tg:applied:*');
      const heldTurn = await client.get(marker!);
      // A grant that only the old master took: the promoted replica has the hash as it was before it.
      const lost = await store.reserve('r', plain, ban, { ...lease, holder: 'h2' });
      expect(lost.granted).toBe(20);
      await client.del('tg:quota:{r}');
      await client.hset('tg:quota:{r}', promoted);
      await client.set(marker!, heldTurn!);
      const reconnected = once(client, 'ready');
      client.disconnect(true);
      await reconnected;
      // Its lease used 5 and gives back 15 at once, on the promoted master: the give-back waits
      // for the grant to be added there, and the day holds the 5 used.
      await store.reserve('r', plain, ban, {
        ...backWhole,
        holder: 'h2',
        giveBack: 15,
        giveBackMinuteStartMs: lost.minuteStartMs,
        giveBackDayStartMs: lost.dayStartMs,
        heldUntilMs: lost.nowMs + lease.leaseMs,
        giveBackHashEpoch: lost.hashEpoch,
      });
      expect(flushed()).toEqual([20]);
      expect(await client.hget('tg:quota:{r}', 'dc')).toBe('5');
      writes.close();
    } finally {
      client.disconnect();
    }
  });

  it('names the units of give-backs a master that lacks them left counted, and none it holds', async () => {
    const client = redis.server().client();
    try {
      const { store, writes, logged } = await waitingStore(client);
      const lost = () => logged('unreplicated lease give-backs lost with the old master', 'units');
      const checked = () => logged('unreplicated quota writes checked on redis', 'held');
      const plain: Quota = { perMinute: 100, perDay: 1000 };
      const giveBack = { ...lease, want: 0, ends: true, giveBack: 7 };
      expect((await store.reserve('g', plain, ban, lease)).granted).toBe(20);
      await store.reserve('g', plain, ban, giveBack);
      // The same master holds the give-back's turn: nothing is named.
      client.disconnect(true);
      await until(() => checked().length > 0);
      expect(lost()).toEqual([]);

      // A master lacking it (its marker gone, as on a replica promoted before it arrived): named once.
      expect((await store.reserve('g', plain, ban, { ...lease, holder: 'h2' })).granted).toBe(20);
      await store.reserve('g', plain, ban, { ...giveBack, holder: 'h2' });
      await client.del(...(await client.keys('tg:applied:*')));
      client.disconnect(true);
      await until(() => checked().length > 1);
      expect(lost()).toEqual([7]);
      writes.close();
    } finally {
      client.disconnect();
    }
  });
});
