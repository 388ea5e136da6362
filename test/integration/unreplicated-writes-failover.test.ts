import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { UnreplicatedWrites } from '../../src/gateway/unreplicated-writes.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { connectRedis, type RedisClient } from '../../src/store/redis/connect.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { FaultProxy } from '../helpers/fault-proxy.js';
import { pollUntil } from '../helpers/poll.js';
import { TestRedisSentinel } from '../helpers/redis-sentinel.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// quota.waitForReplica with the replica's link to the master cut (a fault proxy on it): every WAIT
// times out, and the turns' writes are kept (unreplicated-writes.ts). What becomes of them depends
// on whether the master answering after the reconnection holds them (its marker, turn-marks.ts):
// - a failover to the replica that never got them: added to it once, prepaid credits included;
// - the same master after a mere reconnection: it holds them, nothing is added (no double count).
// Either way the balance, the windows and the usage rows end equal to what was admitted.

const quota: Quota = { perMinute: 1000, perDay: 10_000, credits: 'required' };
const ban: BanPolicy = { afterRejections: 0, window: 60, duration: 60 };
const BALANCE = 100;
const COST = 3;
const UNREPLICATED = 5;

interface Setup {
  set: TestRedisSentinel;
  link: FaultProxy;
  client: RedisClient;
  writes: UnreplicatedWrites;
  store: RedisQuotaStore;
  /** The messages the gateway's side logged. */
  logged: string[];
}

let setup: Setup | undefined;

afterEach(async () => {
  setup?.writes.close();
  setup?.client.disconnect();
  await setup?.link.stop();
  await setup?.set.stop();
  setup = undefined;
});

/** A master, its replica behind a fault proxy, a Sentinel; a store on them with waitForReplica. */
async function start(): Promise<Setup> {
  let link: FaultProxy | undefined;
  const set = await TestRedisSentinel.start(async (masterPort) => (link = await FaultProxy.start(masterPort)).port);
  const client = connectRedis(
    { sentinels: [`127.0.0.1:${set.sentinelPort}`], sentinelMaster: TestRedisSentinel.MASTER_NAME },
    'gateway',
    2000,
  );
  client.on('error', () => {});
  await new Promise((resolve) => client.once('ready', resolve));
  const logged: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void logged.push((JSON.parse(line) as { msg: string }).msg) });
  const store = new RedisQuotaStore(client);
  const writes = new UnreplicatedWrites(store, client, logger, createMetrics());
  expect(store.waitForReplicas({ replicas: 1, timeoutMs: 20 }, writes)).toBe(true);
  return (setup = { set, link: link!, client, writes, store, logged });
}

/** Funds the key, lets the replica get that, cuts its link, then spends UNREPLICATED × COST on the master. */
async function spendUnreplicated({ set, link, store }: Setup): Promise<void> {
  await awayFromDayEdge(60);
  await pollUntil(
    () => store.changeCredits('k', { set: BALANCE }),
    (result) => result.applied,
    { deadline: Date.now() + 30_000, everyMs: 200 },
  );
  const replica = set.replica.client();
  try {
    const held = await pollUntil(
      () => replica.hget('tg:quota:{k}', 'cb'),
      (cb) => cb === String(BALANCE),
      { deadline: Date.now() + 30_000 },
    );
    expect(held).toBe(String(BALANCE));
  } finally {
    replica.disconnect();
  }
  link.partition();
  for (let i = 0; i < UNREPLICATED; i++) expect((await store.consume('k', quota, ban, COST)).verdict).toBe('allowed');
}

/** The key's balance, day count and usage rows on `server`. */
async function countsOn(server: { client(): import('ioredis').Redis }) {
  const redis = server.client();
  try {
    const [cb, dc] = await redis.hmget('tg:quota:{k}', 'cb', 'dc');
    const usage: Record<string, number> = { a: 0, u: 0, c: 0 };
    for (const key of await redis.keys('tg:usage:{k}:*')) {
      for (const [field, value] of Object.entries(await redis.hgetall(key))) {
        const kind = field.slice(field.lastIndexOf(':') + 1);
        // 'n': requests admitted at one unit each (quota-script.ts, usageAdd): admitted and units both.
        for (const counted of kind === 'n' ? ['a', 'u'] : [kind])
          if (counted in usage) usage[counted] = (usage[counted] ?? 0) + Number(value);
      }
    }
    return { balance: Number(cb), dayCount: Number(dc), usage };
  } finally {
    redis.disconnect();
  }
}

const ADMITTED = {
  balance: BALANCE - UNREPLICATED * COST,
  dayCount: UNREPLICATED * COST,
  usage: { a: UNREPLICATED, u: UNREPLICATED * COST, c: UNREPLICATED * COST },
};

describe('unreplicated quota writes after a reconnection', () => {
  it('are added once, credits included, to the replica promoted by a failover that lost them', async () => {
    const s = await start();
    await spendUnreplicated(s);
    // The bytes held on the link are dropped: the replica never gets those writes.
    s.link.reset();
    await s.set.failover();
    // Sentinel closes the demoted master's clients: the store reconnects to the promoted replica
    // and adds what it lacks.
    const counts = await pollUntil(
      () => countsOn(s.set.replica),
      (c) => c.dayCount >= ADMITTED.dayCount && s.logged.includes('unreplicated quota writes added to redis'),
      { deadline: Date.now() + 60_000, everyMs: 100 },
    );
    expect(counts).toEqual(ADMITTED);
  }, 120_000);

  it('are not added again to the same master, which held them all along', async () => {
    const s = await start();
    await spendUnreplicated(s);
    // The connection drops (killed on the master) and comes back to the same master.
    const master = s.set.master.client();
    try {
      await master.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
    } finally {
      master.disconnect();
    }
    await pollUntil(
      async () => s.logged,
      (logged) =>
        logged.includes('unreplicated quota writes checked on redis') || logged.includes('unreplicated quota writes added to redis'),
      { deadline: Date.now() + 60_000, everyMs: 100 },
    );
    // (A re-add's flush, if one was wrongly begun, has had time to land.)
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await countsOn(s.set.master)).toEqual(ADMITTED);
    expect(s.logged).not.toContain('unreplicated quota writes added to redis');
  }, 120_000);
});
