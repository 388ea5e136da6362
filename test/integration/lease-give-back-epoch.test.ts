import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Quota } from '../../src/config/plans-schema.js';
import { RuleLeases } from '../../src/quota/rule-leases.js';
import { connectRedis, whenReady } from '../../src/store/redis/connect.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { leaseReplicas, SETTINGS } from '../helpers/lease-replicas.js';
import { TestRedis } from '../helpers/redis-server.js';
import { ruleCharge } from '../helpers/rule-charges.js';

// A give-back from a lease granted before Redis restarted empty reaches the new Redis after a
// lease of the same counter was granted there. Its units were never counted by the new counter:
// crediting them (even capped by the units out on leases now, 'lm' / 'lu') takes off units the new
// lease still holds, so the window could admit them twice. Two replicas in the test's process on
// one injected clock, on a real redis-server killed and started again without persistence.
// Invariant: the new counter is exactly the units admitted since the restart plus those out on the
// new lease.

const QUOTA: Quota = { perMinute: 100_000, perDay: 1_000_000 };

let redis: TestRedis;
const clock = { nowMs: 0 };
const replicas = leaseReplicas(clock);
const untilLeased = (r: Awaited<ReturnType<typeof replicas.open>>, subject: string) => replicas.untilLeased(r, subject, QUOTA);

beforeAll(async () => {
  redis = await TestRedis.start();
});

afterEach(() => replicas.closeAll());

afterAll(async () => {
  await redis?.stop();
});

async function hget(key: string, field: string): Promise<number> {
  const client = redis.client();
  try {
    return Number((await client.hget(key, field)) ?? 0);
  } finally {
    client.disconnect();
  }
}

/** Redis killed and started again, empty (no persistence): every counter is gone. */
async function restartEmpty(): Promise<void> {
  await redis.kill();
  await redis.launch();
}

describe('a give-back from before Redis restarted empty', { timeout: 120_000 }, () => {
  // The plan's LEASE_SCRIPT caps a give-back by 'lm'/'ld' (units out in this window), which a lease
  // granted after the restart fills: the old give-back takes those units off. Rule counters carry
  // an epoch ('ep', rule-lease-script.ts) for this; the plan's windows have none yet.
  it.fails("credits nothing against a plan's new lease (the new counter keeps the units that lease holds)", async () => {
    clock.nowMs = Date.UTC(2030, 0, 10, 12, 0, 5);
    const subject = 'epoch-plan';
    const a = await replicas.open(redis.url);
    const b = await replicas.open(redis.url);
    await untilLeased(a, subject);
    const heldByA = a.leases.held(subject);
    expect(heldByA).toBeGreaterThan(0);
    await restartEmpty();
    await whenReady(a.client, 10_000);
    await whenReady(b.client, 10_000);
    const admittedByB = await untilLeased(b, subject);
    // A's lease (granted first) ends before B's: its give-back reaches the new Redis.
    clock.nowMs += SETTINGS.leaseMs - 40;
    await expect.poll(() => a.leases.held(subject), { timeout: 30_000, interval: 20 }).toBe(0);
    await expect.poll(() => a.leases.giveBacks.pending, { timeout: 30_000, interval: 20 }).toBe(0);
    const heldByB = b.leases.held(subject);
    expect(heldByB).toBeGreaterThan(0);
    expect(await hget(`tg:quota:{${subject}}`, 'mc')).toBe(admittedByB + heldByB);
  });

  it("credits nothing against a rule counter's new lease (its epoch 'ep')", async () => {
    clock.nowMs = Date.UTC(2030, 0, 10, 12, 0, 5);
    const rule = ruleCharge('epoch-rule', 100_000, 60_000, false, 1, 'd1');
    const open = async () => {
      const client = connectRedis(redis.url, 'gateway', 250);
      client.on('error', () => undefined);
      await whenReady(client, 10_000);
      const store = new RedisQuotaStore(client, () => clock.nowMs);
      return { client, ruleLeases: new RuleLeases({ reserveRule: store.reserveRule!.bind(store) }, SETTINGS, () => clock.nowMs) };
    };
    const a = await open();
    const b = await open();
    try {
      /** Requests 10 ms apart until `r` holds a lease of the counter; those it admitted from it. */
      const untilRuleLeased = async (r: typeof a) => {
        let admitted = 0;
        for (let i = 0; i < 200 && r.ruleLeases.leases.held('limit:epoch-rule:d1') === 0; i++) {
          clock.nowMs += 10;
          if (r.ruleLeases.covers(rule)) {
            r.ruleLeases.take(rule, clock.nowMs);
            admitted++;
          }
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
        expect(r.ruleLeases.leases.held('limit:epoch-rule:d1')).toBeGreaterThan(0);
        return admitted;
      };
      await untilRuleLeased(a);
      await restartEmpty();
      await whenReady(a.client, 10_000);
      await whenReady(b.client, 10_000);
      const admittedByB = await untilRuleLeased(b);
      clock.nowMs += SETTINGS.leaseMs - 40;
      await expect.poll(() => a.ruleLeases.leases.held('limit:epoch-rule:d1'), { timeout: 30_000, interval: 20 }).toBe(0);
      await expect.poll(() => a.ruleLeases.leases.giveBacks.pending, { timeout: 30_000, interval: 20 }).toBe(0);
      const heldByB = b.ruleLeases.leases.held('limit:epoch-rule:d1');
      expect(heldByB).toBeGreaterThan(0);
      expect(await hget('tg:limit:epoch-rule:{d1}', 'c')).toBe(admittedByB + heldByB);
    } finally {
      for (const r of [a, b]) {
        await r.ruleLeases.close();
        r.client.disconnect();
      }
    }
  });
});
