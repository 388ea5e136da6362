import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Quota } from '../../src/config/plans-schema.js';
import { leaseHoldersKey, quotaKey } from '../../src/store/redis/redis-keys.js';
import { FaultProxy } from '../helpers/fault-proxy.js';
import { leaseReplicas, NO_BANS, type Replica } from '../helpers/lease-replicas.js';
import { TestRedis } from '../helpers/redis-server.js';

// A lease ask whose answer never came (here: Redis 400 ms away each way, past the replica's 250 ms
// command timeout) may have been granted. A key that asks no more would leave that block counted,
// never admitted, until its windows end (a warm key's block: a minute of its units). The replica
// names it alone about a second later (quota-leases.ts rule 5, cancelLost), and Redis gives it back.
// A replica of the quota step in the test's process (RedisQuotaStore, QuotaLeases) through a fault
// proxy of the test's own, one real redis-server, the injected clock Redis's too.

const QUOTA: Quota = { perMinute: 100_000, perDay: 1_000_000 };

let redis: TestRedis;
let proxy: FaultProxy;
const clock = { nowMs: 0 };
const replicas = leaseReplicas(clock);

beforeAll(async () => {
  redis = await TestRedis.start();
  proxy = await FaultProxy.start(redis.port);
});

afterEach(async () => {
  proxy.latency(0);
  await replicas.closeAll();
});

afterAll(async () => {
  await proxy?.stop();
  await redis?.stop();
});

/** The key's counts and lease fields as Redis holds them, and its holders' fields. */
async function stored(subject: string) {
  const client = redis.client();
  try {
    const [mc, dc, ld, he] = await client.hmget(quotaKey(subject), 'mc', 'dc', 'ld', 'he');
    const holders = await client.hkeys(leaseHoldersKey(subject));
    return {
      minute: Number(mc ?? 0),
      day: Number(dc ?? 0),
      leased: Number(ld ?? 0),
      granted: he !== null,
      records: holders.filter((f) => f.startsWith('g:')),
    };
  } finally {
    client.disconnect();
  }
}

/**
 * A replica whose first lease ask of `subject` (requests 10 ms apart on the clock, admitted by
 * nobody, until it is on its way) Redis runs but whose answer comes too late: Redis 400 ms away
 * each way meanwhile, then near again.
 */
async function afterLostAsk(subject: string, quota: Quota = QUOTA): Promise<Replica> {
  const r = await replicas.open(proxy.url);
  proxy.latency(400);
  for (let i = 0; i < 100; i++) {
    clock.nowMs += 10;
    const waiting = r.leases.admit(subject, quota, NO_BANS, 1);
    if (!(waiting instanceof Promise)) continue;
    const failure = await waiting.then(
      () => 'answered',
      (err: unknown) => err,
    );
    expect(String(failure)).toMatch(/timed out/i);
    proxy.latency(0);
    return r;
  }
  throw new Error('no lease was asked for');
}

describe('a lease ask whose answer never came, of a key that asks no more', { timeout: 60_000 }, () => {
  it('is named alone once Redis answers again: its block goes back without another request of the key', async () => {
    clock.nowMs = Date.UTC(2030, 0, 10, 12, 0, 5);
    const subject = 'lost-ask-alone';
    const a = await afterLostAsk(subject);
    // The key asks no more. Redis ran the ask (a grant was made: 'he'), and gets the block back.
    await expect
      .poll(() => stored(subject), { timeout: 15_000, interval: 100 })
      .toEqual({
        minute: 0,
        day: 0,
        leased: 0,
        granted: true,
        records: [],
      });
    expect(a.leases.held(subject)).toBe(0);
  });

  it('the key asks again before that: its ask names the lost one, and its own block stays counted', async () => {
    clock.nowMs = Date.UTC(2030, 0, 10, 12, 1, 5);
    const subject = 'lost-ask-named';
    const a = await afterLostAsk(subject);
    const admitted = await replicas.untilLeased(a, subject, QUOTA);
    const held = a.leases.held(subject);
    expect(held).toBeGreaterThan(0);
    // Well past the named-alone step's time: the live lease's block is still counted, the lost one is not.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect(a.leases.held(subject)).toBe(held);
    const after = await stored(subject);
    expect(after).toMatchObject({ minute: admitted + held, day: admitted + held });
    // The live lease's grant: its record stays, to be named should its give-back be lost.
    expect(after.records).toHaveLength(1);
  });
});

// Found reviewing the named-alone step: it went with the quota of the ask that was lost. A key
// changed meanwhile (keys.onChange: its billing anchor moved, so its month begins on another day)
// is counted under its new quota by then; a step under the old one read the stored month as ended
// (another start) and, as it gave the lost block's minute back, wrote the state with that month's
// count at 0: the month counted under the new quota was forgotten, and would be admitted again
// (measured: 40 → 0). Before it only the key's next ask named a lost one, under the key's quota then.
const BEFORE: Quota = { perMinute: 100_000, perDay: 1_000_000, perMonth: 10_000_000, calendar: { timeZone: 'UTC' } };
const AFTER: Quota = { ...BEFORE, calendar: { timeZone: 'UTC', anchorDay: 15 } };

describe('a lost ask of a key that changed before it was named alone', { timeout: 60_000 }, () => {
  it("leaves the month counted under the key's new quota as it is", async () => {
    clock.nowMs = Date.UTC(2031, 2, 4, 10, 0, 5);
    const subject = 'stale-quota-cancel';
    const r = await afterLostAsk(subject, BEFORE);
    // The key's billing anchor moves (keys.onChange); its requests are counted under the new quota
    // (by Redis: another replica's, or this one's not yet hot again).
    r.leases.forget(subject);
    for (let i = 0; i < 40; i++) expect((await r.store.consume(subject, AFTER, NO_BANS, 1)).verdict).toBe('allowed');
    const month = (await r.store.usage(subject, AFTER)).monthCount;
    expect(month).toBeGreaterThanOrEqual(40);
    // Well past the time the lost ask is named alone.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect((await r.store.usage(subject, AFTER)).monthCount).toBe(month);
  });
});
