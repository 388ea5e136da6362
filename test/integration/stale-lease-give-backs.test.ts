import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Quota } from '../../src/config/plans-schema.js';
import { RuleLeases } from '../../src/quota/rule-leases.js';
import { connectRedis, whenReady } from '../../src/store/redis/connect.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { leaseReplicas, SETTINGS } from '../helpers/lease-replicas.js';
import { TestRedis } from '../helpers/redis-server.js';
import { ruleCharge } from '../helpers/rule-charges.js';
import { ruleSubject, type RuleCharge } from '../../src/quota/limit-rules.js';

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

/** A replica's leases of rule counters, on a connection of its own, on the test's clock. */
async function ruleReplica() {
  const client = connectRedis(redis.url, 'gateway', 250);
  client.on('error', () => undefined);
  await whenReady(client, 10_000);
  const store = new RedisQuotaStore(client, () => clock.nowMs);
  return { client, ruleLeases: new RuleLeases({ reserveRule: store.reserveRule!.bind(store) }, SETTINGS, () => clock.nowMs) };
}
type RuleReplica = Awaited<ReturnType<typeof ruleReplica>>;
const ruleReplicas: RuleReplica[] = [];
afterEach(async () => {
  for (const r of ruleReplicas.splice(0)) {
    await r.ruleLeases.close();
    r.client.disconnect();
  }
});

/** Requests of `rule` 10 ms apart until `r` holds a lease of its counter; those it admitted from the lease. */
async function untilRuleLeased(r: RuleReplica, rule: RuleCharge): Promise<number> {
  let admitted = 0;
  for (let i = 0; i < 200 && r.ruleLeases.leases.held(ruleSubject(rule)) === 0; i++) {
    clock.nowMs += 10;
    if (r.ruleLeases.covers(rule)) {
      r.ruleLeases.take(rule, clock.nowMs);
      admitted++;
    }
    // The ask's answer comes in a later turn.
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  expect(r.ruleLeases.leases.held(ruleSubject(rule))).toBeGreaterThan(0);
  return admitted;
}

/** Ends `r`'s lease of `rule` by time (the sweep finds it) and waits for its give-back to be applied. */
async function endRuleLease(r: RuleReplica, rule: RuleCharge): Promise<void> {
  await expect.poll(() => r.ruleLeases.leases.held(ruleSubject(rule)), { timeout: 30_000, interval: 20 }).toBe(0);
  await expect.poll(() => r.ruleLeases.leases.giveBacks.pending, { timeout: 30_000, interval: 20 }).toBe(0);
}

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
  // A cap by 'lm'/'ld' (units out in this window) alone does not do: a lease granted after the
  // restart fills them. The plan's counters carry an epoch ('he', LEASE_SCRIPT), rule counters
  // theirs ('ep', rule-lease-script.ts).
  it("credits nothing against a plan's new lease (the new counter keeps the units that lease holds)", async () => {
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
    const a = await ruleReplica();
    const b = await ruleReplica();
    ruleReplicas.push(a, b);
    await untilRuleLeased(a, rule);
    await restartEmpty();
    await whenReady(a.client, 10_000);
    await whenReady(b.client, 10_000);
    const admittedByB = await untilRuleLeased(b, rule);
    clock.nowMs += SETTINGS.leaseMs - 40;
    await endRuleLease(a, rule);
    const heldByB = b.ruleLeases.leases.held(ruleSubject(rule));
    expect(heldByB).toBeGreaterThan(0);
    expect(await hget('tg:limit:epoch-rule:{d1}', 'c')).toBe(admittedByB + heldByB);
  });
});

describe("a give-back of a rule counter's lease after a reload changed the rule's window", { timeout: 120_000 }, () => {
  // A reload that makes a perMinute rule perHour (same name and values: the same counter) ends
  // the old charge's leases on next use or by time; their give-backs run RULE_LEASE_SCRIPT with
  // the old rule's window. They must leave the hour's counter as the new rule counted it.
  it("leaves the new window's count alone", async () => {
    clock.nowMs = Date.UTC(2030, 0, 10, 12, 30, 5);
    const perMinute = ruleCharge('window-change', 100_000, 60_000, false, 1, 'd2');
    const perHour = { ...perMinute, windowMs: 3_600_000 };
    const a = await ruleReplica();
    const b = await ruleReplica();
    ruleReplicas.push(a, b);
    await untilRuleLeased(a, perMinute);
    const admittedByB = await untilRuleLeased(b, perHour);
    clock.nowMs += SETTINGS.leaseMs - 40;
    await endRuleLease(a, perMinute);
    const heldByB = b.ruleLeases.leases.held(ruleSubject(perHour));
    expect(heldByB).toBeGreaterThan(0);
    expect(await hget('tg:limit:window-change:{d2}', 's')).toBe(Date.UTC(2030, 0, 10, 12));
    expect(await hget('tg:limit:window-change:{d2}', 'c')).toBe(admittedByB + heldByB);
  });
});

describe("a rule counter's lease and charges made anew", { timeout: 120_000 }, () => {
  // The gateway keeps no charge for values too long for its memo (gateway/limit-rules.ts
  // MEMO_KEY_CHARS), nor one evicted from it: each request then brings a new charge object of
  // the same rule and counter. It must use the lease, not end it (a give-back and a new ask to
  // Redis per request, beside the request's own script call: a caller choosing long values would
  // triple the Redis work of a hot rule).
  it('admits from the lease of the counter', async () => {
    clock.nowMs = Date.UTC(2030, 0, 10, 12, 40, 5);
    const rule = ruleCharge('anew', 100_000, 60_000, false, 1, 'd3');
    const r = await ruleReplica();
    ruleReplicas.push(r);
    let fromLease = 0;
    for (let i = 0; i < 100; i++) {
      clock.nowMs += 10;
      const charge = { ...rule };
      if (r.ruleLeases.covers(charge)) {
        r.ruleLeases.take(charge, clock.nowMs);
        fromLease++;
      }
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(fromLease).toBeGreaterThan(50);
  });
});
