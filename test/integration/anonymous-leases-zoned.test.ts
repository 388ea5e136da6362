import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { AnonymousConsumers } from '../../src/auth/anonymous-consumer.js';
import { plansInZone } from '../../src/config/plans-schema.js';
import { quotaFor } from '../../src/quota/quota-for.js';
import { QuotaLeases } from '../../src/quota/quota-leases.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { redisForFile } from '../helpers/redis-for-file.js';
import { inOneMinute } from '../helpers/windows.js';

// An anonymous caller is a new consumer object on every request (access.ts). Under a time zone
// (gateway.yaml quota.timeZone) its quota is derived per consumer (quota-for.ts), and a lease is
// held for one quota object: each request ended the lease the one before had opened, so a hot
// anonymous address cost a reservation and a give-back per request and was never admitted on a lease.

const redis = redisForFile();
const plans = plansInZone(
  { plans: { free: { perMinute: 100_000, perDay: 1_000_000 } }, ban: { afterRejections: 1000, window: 60, duration: 60 } },
  'Europe/Berlin',
);

describe('an anonymous caller under a time zone, with leases', () => {
  it('is admitted on its lease, request after request', async () => {
    let run = 0;
    // A lease ends with its minute: a fresh address for a second run, if a minute edge fell inside the first.
    await inOneMinute(() => scenario(`2001:db8:${++run}::7`));
  });
});

async function scenario(address: string): Promise<void> {
  const store = new RedisQuotaStore(redis.client());
  const leases = new QuotaLeases(store, { leaseMs: 5000, hotPerSecond: 1, minBlock: 1, maxBlock: 50, spread: 1, replicas: 1 });
  await store.noticesReady; // the subscription's start ends every lease under way (a gap)
  const consumers = new AnonymousConsumers(randomBytes(32));
  const admit = async () => {
    const consumer = consumers.of(address, 'free');
    const quota = quotaFor(consumer, plans)!;
    return await leases.admit(consumer.id, quota, plans.ban, 1);
  };
  expect(await admit()).toBeUndefined(); // hot at once: the first opens a lease, the store decides it
  const onLease = [];
  for (let i = 0; i < 10; i++) onLease.push(await admit());
  expect(onLease.filter((outcome) => outcome?.verdict === 'allowed')).toHaveLength(10);
  await leases.close();
  await store.close();
}
