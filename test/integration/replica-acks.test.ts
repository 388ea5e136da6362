import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { connectRedis } from '../../src/store/redis/connect.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { ReplicaAcks } from '../../src/store/redis/replica-acks.js';
import type { ReplicaWaitListener } from '../../src/store/redis/replica-wait.js';
import { TurnMarks, type TurnMark } from '../../src/store/redis/turn-marks.js';
import { FaultProxy } from '../helpers/fault-proxy.js';
import { pollUntil } from '../helpers/poll.js';
import { replicaOf, TestRedis } from '../helpers/redis-server.js';

// quota.waitForReplica's WAITs on a connection of their own (replica-acks.ts): a turn is
// acknowledged only by a server that holds its marker (after a failover the WAIT's connection may
// reach another server than the turn's), and only once a replica has every write up to it: the
// connection's own write puts its WAIT behind the turn's, so a stopped replica acknowledges nothing.
// The same for the turns' markers (turn-marks.ts): a server that holds a turn's marker holds its
// writes, the marker being written behind them. A script call answered NOSCRIPT is sent again by
// ioredis once that answer comes, behind the marker: only a later marker covers the turn then.

const quota: Quota = { perMinute: 1000, perDay: 10_000 };
const ban: BanPolicy = { afterRejections: 0, window: 60, duration: 60 };

let master: TestRedis;
let replica: TestRedis;
let client: Redis;

beforeAll(async () => {
  master = await TestRedis.start();
  replica = await replicaOf(master);
  client = master.client();
  await client.ping();
});

afterAll(async () => {
  client?.disconnect();
  replica?.resume();
  await replica?.stop();
  await master?.stop();
});

/** Whether `turn` is acknowledged within 30 s (asked again until it is). */
function acknowledgedSoon(acks: ReplicaAcks, turn: TurnMark): Promise<boolean> {
  return pollUntil(
    () => acks.acknowledged(turn),
    (acknowledged) => acknowledged,
    { deadline: Date.now() + 30_000 },
  );
}

describe('replica acknowledgements on a connection of their own', () => {
  it('acknowledge a turn whose marker the server holds, once a replica has it, and no other', async () => {
    const marks = new TurnMarks(client);
    const acks = new ReplicaAcks(client, { replicas: 1, timeoutMs: 1000 }, marks);
    const connection = marks.current();
    try {
      // No marker of the turn on this server (as on a replica promoted without it): not acknowledged.
      expect(await acks.acknowledged({ connection, seq: 1 })).toBe(false);

      await client.set(marks.keyOf(connection), 3);
      expect(await acks.acknowledged({ connection, seq: 3 })).toBe(true);
      // A marker below the turn's: the server lacks it.
      expect(await acks.acknowledged({ connection, seq: 4 })).toBe(false);

      // Turns answered together share one WAIT, each told its outcome.
      expect(await Promise.all([acks.acknowledged({ connection, seq: 2 }), acks.acknowledged({ connection, seq: 3 })])).toEqual([
        true,
        true,
      ]);

      // A stopped replica: the turn's write is past what it acknowledged, so nothing is.
      replica.pause();
      await client.incr('written-while-stopped');
      expect(await Promise.all([acks.acknowledged({ connection, seq: 3 }), acks.acknowledged({ connection, seq: 2 })])).toEqual([
        false,
        false,
      ]);
      replica.resume();
      expect(await acknowledgedSoon(acks, { connection, seq: 3 })).toBe(true);
    } finally {
      acks.close();
    }
  });

  it('wait behind their own write even once Redis lost their script (SCRIPT FLUSH)', async () => {
    const marks = new TurnMarks(client);
    const acks = new ReplicaAcks(client, { replicas: 1, timeoutMs: 1000 }, marks);
    const connection = marks.current();
    const admin = master.client();
    const monitor = await monitorOf(admin);
    try {
      await client.set(marks.keyOf(connection), 1);
      // The script has run on the acknowledgements' connection.
      expect(await acks.acknowledged({ connection, seq: 1 })).toBe(true);
      const seen: string[][] = [];
      monitor.on('monitor', (_time: string, args: string[]) => void seen.push(args));
      // Redis loses its scripts (an operator's SCRIPT FLUSH; Redis 7.4 evicting scripts loaded by
      // EVAL). A call by EVALSHA is answered NOSCRIPT and sent again behind the WAIT written after
      // it, which would count the replicas that have the connection's previous write only.
      await admin.script('FLUSH');
      expect(await acks.acknowledged({ connection, seq: 1 })).toBe(true);
      // Everything the round ran is shown before this.
      await admin.set('after-the-round', 1);
      await pollUntil(
        async () => seen.some((args) => args[1] === 'after-the-round'),
        (shown) => shown,
        { deadline: Date.now() + 10_000 },
      );
      // Only what followed the flush: MONITOR's lines of the first round may reach the listener
      // after it was added (a loaded machine), and its WAIT is not the one judged here.
      const flushed = seen.findIndex((args) => args[0]?.toUpperCase() === 'SCRIPT' && args[1]?.toUpperCase() === 'FLUSH');
      expect(flushed).toBeGreaterThanOrEqual(0);
      const round = seen.slice(flushed);
      const waited = round.findIndex((args) => args[0]?.toUpperCase() === 'WAIT');
      const calls = round.flatMap((args, i) => (/^eval/i.test(args[0]!) && args.includes(`tg:acked:{${marks.replicaId}}`) ? [i] : []));
      expect(waited).toBeGreaterThan(0);
      expect(calls.length).toBeGreaterThan(0);
      expect(calls.filter((i) => i > waited)).toEqual([]);
    } finally {
      monitor.disconnect();
      admin.disconnect();
      acks.close();
    }
  });

  it('cover a turn whose call Redis answered NOSCRIPT only from a marker written behind the call sent again', async () => {
    // The gateway's own connection (no offline queue: a call is written at once or fails).
    const connection = connectRedis(master.url, 'gateway', 2000) as Redis;
    connection.on('error', () => {});
    await new Promise((resolve) => connection.once('ready', resolve));
    const marks = new TurnMarks(connection);
    const told: Array<TurnMark & { replicated: boolean }> = [];
    const listener: ReplicaWaitListener = {
      marks,
      unreplicated: (_subject, _admitted, _quota, mark) => void told.push({ ...mark, replicated: false }),
      unreplicatedGiveBack: () => {},
      settled: () => Promise.resolve(),
      replicated: (mark) => void told.push({ ...mark, replicated: true }),
    };
    const store = new RedisQuotaStore(connection);
    expect(store.waitForReplicas({ replicas: 1, timeoutMs: 50 }, listener)).toBe(true);
    const admin = master.client();
    const monitor = await monitorOf(admin);
    try {
      // The scripts are loaded on the store's connection.
      expect((await store.consume('k', quota, ban, 1)).verdict).toBe('allowed');
      const seen: string[][] = [];
      monitor.on('monitor', (_time: string, args: string[]) => void seen.push(args));
      await admin.script('FLUSH');
      expect((await store.consume('k', quota, ban, 1)).verdict).toBe('allowed');
      const turn = told.at(-1)!;
      // A later turn: its calls and marker go behind the call sent again.
      expect((await store.consume('k', quota, ban, 1)).verdict).toBe('allowed');
      await pollUntil(
        async () => seen.filter((args) => args[0] === 'set' && args[1] === marks.keyOf(turn.connection)).length,
        (markers) => markers >= 2,
        { deadline: Date.now() + 10_000 },
      );
      // The quota key's calls: the one refused NOSCRIPT, the same sent again, the later turn's.
      const calls = seen.flatMap((args, i) => (/^eval/i.test(args[0]!) && args.includes('tg:quota:{k}') ? [i] : []));
      expect(calls).toHaveLength(3);
      const sentAgain = calls[1]!;
      const covering = seen.findIndex(
        (args) => args[0] === 'set' && args[1] === marks.keyOf(turn.connection) && Number(args[2]) >= turn.seq,
      );
      // The turn's write (its call sent again) runs before the first marker said to cover it.
      expect(covering).toBeGreaterThan(sentAgain);
    } finally {
      monitor.disconnect();
      admin.disconnect();
      await store.close();
      connection.disconnect();
    }
  });

  it('come again once their connection stopped answering (its bytes held by the network), on a new one', async () => {
    const proxy = await FaultProxy.start(master.port);
    // The gateway's own connection, through the proxy, with its command timeout.
    const connection = connectRedis(proxy.url, 'gateway', 250) as Redis;
    connection.on('error', () => {});
    await new Promise((resolve) => connection.once('ready', resolve));
    const marks = new TurnMarks(connection);
    const acks = new ReplicaAcks(connection, { replicas: 1, timeoutMs: 50 }, marks);
    const turn = { connection: marks.current(), seq: 1 };
    try {
      await connection.set(marks.keyOf(turn.connection), 1);
      expect(await acknowledgedSoon(acks, turn)).toBe(true);
      // The acknowledgements' connection alone stops answering, as one a middlebox forgot (its
      // commands time out; nothing tells ioredis it is gone): not acknowledged meanwhile, and
      // acknowledged again once the connection is replaced (the held one never answers).
      proxy.holdFrom(`tg:acked:{${marks.replicaId}}`);
      expect(await acks.acknowledged(turn)).toBe(false);
      expect(await acknowledgedSoon(acks, turn)).toBe(true);
    } finally {
      acks.close();
      connection.disconnect();
      await proxy.stop();
    }
  }, 60_000);
});

/**
 * A MONITOR connection, once `client` (which it duplicates) is ready: a command another
 * connection sends just after MONITOR's OK, as a new client's ready check (INFO), can reach
 * ioredis before it is in monitor mode ("Command queue state error"); no connection of the
 * test's own is connecting then.
 */
async function monitorOf(client: Redis): Promise<Redis> {
  await client.ping();
  return client.monitor();
}
