import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { UnreplicatedWrites } from '../../src/gateway/unreplicated-writes.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { pollUntil } from '../helpers/poll.js';
import { redisForFile } from '../helpers/redis-for-file.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// quota.waitForReplica on a redis-server with no replica: every WAIT times out and every turn is
// kept (unreplicated-writes.ts). Past a bound the kept turns are folded into sums per connection
// (kept-turns.ts), so a replica down for hours does not grow the gateway's memory per request.
// Folded, they still settle after a reconnection: a master holding them gets nothing, one lacking
// them gets them all once, and one holding some gets all of them (counted twice, never admitted twice).

const redis = redisForFile();

const quota: Quota = { perMinute: 1000, perDay: 10_000 };
const ban: BanPolicy = { afterRejections: 0, window: 60, duration: 60 };
const TURNS = 10;

describe('unreplicated writes folded while no replica acknowledges', () => {
  it('are settled after a reconnection as the turns they fold', async () => {
    await awayFromDayEdge(60);
    const client = redis.server().client();
    try {
      // Connected before its first turn, as the gateway is.
      await client.ping();
      const lines: Array<{ msg: string; units?: number; turns?: number; held?: number }> = [];
      const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as (typeof lines)[number]) });
      const store = new RedisQuotaStore(client);
      // A bound of 4 turns and writes: a decision's turn is 2, so every third turn folds the kept ones.
      const writes = new UnreplicatedWrites(store, client, logger, createMetrics(), 4);
      store.waitForReplicas({ replicas: 1, timeoutMs: 5 }, writes);
      const spend = async () => {
        for (let i = 0; i < TURNS; i++) expect((await store.consume('f', quota, ban)).verdict).toBe('allowed');
      };
      const dayCount = async () => Number(await client.hget('tg:quota:{f}', 'dc'));
      const added = () => lines.filter((l) => l.msg === 'unreplicated quota writes added to redis').reduce((n, l) => n + l.units!, 0);
      const checks = () => lines.filter((l) => l.msg === 'unreplicated quota writes checked on redis');

      // The same master after a reconnection holds them all: nothing added.
      await spend();
      expect(lines.some((l) => l.msg.startsWith('unreplicated quota writes folded'))).toBe(true);
      client.disconnect(true);
      await pollUntil(
        async () => checks().length,
        (n) => n > 0,
        { deadline: Date.now() + 60_000 },
      );
      expect(checks()[0]).toMatchObject({ turns: TURNS, held: TURNS });
      expect(added()).toBe(0);
      expect(await dayCount()).toBe(TURNS);

      // A master lacking them (the markers gone, as on a replica promoted before they reached it): all added, once.
      await spend();
      await client.del(...(await client.keys('tg:applied:*')));
      client.disconnect(true);
      await pollUntil(
        async () => added(),
        (n) => n >= TURNS,
        { deadline: Date.now() + 60_000 },
      );
      expect(checks()[1]).toMatchObject({ turns: TURNS, held: 0 });
      expect(added()).toBe(TURNS);
      expect(await dayCount()).toBe(3 * TURNS);

      // A master holding the first half of them: the folded ones all added again, and said so.
      await spend();
      const marker = (await client.keys('tg:applied:*')).sort().at(-1)!;
      await client.set(marker, Number(await client.get(marker)) - TURNS / 2);
      client.disconnect(true);
      await pollUntil(
        async () => added(),
        (n) => n >= 2 * TURNS,
        { deadline: Date.now() + 60_000 },
      );
      expect(lines.some((l) => l.msg === 'folded unreplicated quota writes partly held: all added')).toBe(true);
      expect(added()).toBe(2 * TURNS);
      expect(await dayCount()).toBe(5 * TURNS);
      writes.close();
    } finally {
      client.disconnect();
    }
  });

  it('are added once when turns of the lost connection are folded while the master is asked about them', async () => {
    await awayFromDayEdge(60);
    const client = redis.server().client();
    try {
      await client.ping();
      const lines: Array<{ msg: string; units?: number }> = [];
      const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as (typeof lines)[number]) });
      const store = new RedisQuotaStore(client);
      const writes = new UnreplicatedWrites(store, client, logger, createMetrics(), 4 * TURNS);
      store.waitForReplicas({ replicas: 1, timeoutMs: 5 }, writes);
      for (let i = 0; i < TURNS; i++) expect((await store.consume('g', quota, ban)).verdict).toBe('allowed');
      // The master lacks them (their markers gone, as on a replica promoted before they reached it).
      await client.del(...(await client.keys('tg:applied:*')));
      // Connected again: the kept turns' markers are asked for (the gateway's listener, first), and
      // meanwhile the new connection's unacknowledged writes pass the bound and fold every kept turn.
      client.once('ready', () => {
        const mark = { connection: writes.marks.current(), seq: Number.MAX_SAFE_INTEGER };
        for (let i = 0; i < 4 * TURNS; i++)
          writes.unreplicated('other', { verdict: 'allowed', nowMs: Date.now(), cost: 1, bannedUntilMs: 0 }, quota, mark);
      });
      client.disconnect(true);
      const added = () => lines.filter((l) => l.msg === 'unreplicated quota writes added to redis').reduce((n, l) => n + l.units!, 0);
      await pollUntil(
        async () => added(),
        (n) => n >= TURNS,
        { deadline: Date.now() + 60_000 },
      );
      // (A second add, if one was wrongly begun, has had time to land.)
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(added()).toBe(TURNS);
      expect(Number(await client.hget('tg:quota:{g}', 'dc'))).toBe(2 * TURNS);
      writes.close();
    } finally {
      client.disconnect();
    }
  });
});
