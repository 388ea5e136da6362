import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Quota } from '../../src/config/plans-schema.js';
import { FaultProxy } from '../helpers/fault-proxy.js';
import { leaseReplicas, SETTINGS, type Replica } from '../helpers/lease-replicas.js';
import { TestRedis } from '../helpers/redis-server.js';

// Give-backs of ended leases that Redis did not get (restarted, partitioned, reset) are sent again
// once it is back, and applied once (src/quota/lease-give-backs.ts, LEASE_SCRIPT's 'gb:<holder>').
// A replica whose path to Redis breaks (a gateway's connection, through a fault proxy of the
// test's own) and, where it matters, a second one beside it on a direct connection, on one
// injected clock. The invariant after each fault: Redis's minute and day counts are exactly the
// units admitted plus the units still out on leases; a give-back lost leaves Redis above that, a
// give-back credited twice leaves it below (units a lease still holds counted as free: the window
// could admit them twice).

const QUOTA: Quota = { perMinute: 100_000, perDay: 1_000_000 };

let redis: TestRedis;
let proxy: FaultProxy;
const clock = { nowMs: 0 };
const replicas = leaseReplicas(clock);
const replica = (url: string) => replicas.open(url);
const untilLeased = (r: Replica, subject: string) => replicas.untilLeased(r, subject, QUOTA);

beforeAll(async () => {
  // Persistence on every write: a restart brings back the counts (and leases' 'lm'/'ld') it had.
  redis = await TestRedis.start(['--appendonly', 'yes', '--appendfsync', 'always']);
  proxy = await FaultProxy.start(redis.port);
});

afterEach(() => replicas.closeAll());

afterAll(async () => {
  await proxy?.stop();
  await redis?.stop();
});

async function counts(subject: string): Promise<{ minute: number; day: number }> {
  const client = redis.client();
  try {
    const [mc, dc] = await client.hmget(`tg:quota:{${subject}}`, 'mc', 'dc');
    return { minute: Number(mc ?? 0), day: Number(dc ?? 0) };
  } finally {
    client.disconnect();
  }
}

/** Ends `subject`'s lease on `r` by time (the sweep finds it), while Redis cannot be reached: its give-back fails. */
async function expireWhileAway(r: Replica, subject: string): Promise<number> {
  const unused = r.leases.held(subject);
  clock.nowMs += SETTINGS.leaseMs + 50;
  await expect.poll(() => r.leases.giveBacks.pending, { timeout: 30_000, interval: 50 }).toBeGreaterThan(0);
  return unused;
}

describe('give-backs of leases that ended while Redis was away', { timeout: 120_000 }, () => {
  it('Redis killed and restarted (with its data): the give-back lands after the restart, once', async () => {
    clock.nowMs = Date.UTC(2030, 0, 10, 12, 0, 5);
    const subject = 'give-back-restart';
    const a = await replica(redis.url);
    const admitted = await untilLeased(a, subject);
    expect(await counts(subject)).toEqual({ minute: admitted + a.leases.held(subject), day: admitted + a.leases.held(subject) });
    await redis.kill();
    const unused = await expireWhileAway(a, subject);
    expect(unused).toBeGreaterThan(0);
    await redis.launch();
    await expect.poll(() => a.leases.giveBacks.pending, { timeout: 30_000, interval: 50 }).toBe(0);
    expect(await counts(subject)).toEqual({ minute: admitted, day: admitted });
  });

  it('a partition whose connection is then reset (the give-back never reached Redis): sent again, once', async () => {
    clock.nowMs = Date.UTC(2030, 0, 10, 12, 1, 5);
    const subject = 'give-back-reset';
    const a = await replica(proxy.url);
    const admitted = await untilLeased(a, subject);
    proxy.partition();
    await expireWhileAway(a, subject);
    // The bytes the partition held (the give-back) die with the connection.
    proxy.reset();
    proxy.heal();
    await expect.poll(() => a.leases.giveBacks.pending, { timeout: 30_000, interval: 50 }).toBe(0);
    expect(await counts(subject)).toEqual({ minute: admitted, day: admitted });
  });

  it('a partition that heals (the first try reaches Redis late, after its timeout): the retry credits nothing', async () => {
    clock.nowMs = Date.UTC(2030, 0, 10, 12, 2, 5);
    const subject = 'give-back-once';
    const a = await replica(proxy.url);
    const b = await replica(redis.url);
    let admitted = await untilLeased(a, subject);
    proxy.partition();
    await expireWhileAway(a, subject);
    // Another replica holds units of the same windows when the first try and its retry arrive:
    // a second credit would be taken from those.
    admitted += await untilLeased(b, subject);
    const held = b.leases.held(subject);
    proxy.heal();
    await expect.poll(() => a.leases.giveBacks.pending, { timeout: 30_000, interval: 50 }).toBe(0);
    // Every try of it has landed by now (a try is sent only after the last one's reply or timeout).
    expect(b.leases.held(subject)).toBe(held);
    expect(await counts(subject)).toEqual({ minute: admitted + held, day: admitted + held });
    await b.leases.close();
    expect(await counts(subject)).toEqual({ minute: admitted, day: admitted });
  });
});
