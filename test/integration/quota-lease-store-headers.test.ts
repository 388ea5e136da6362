import { afterEach, describe, expect, it } from 'vitest';
import type { Quota } from '../../src/config/plans-schema.js';
import type { QuotaOutcome } from '../../src/quota/quota-state.js';
import { reportedWindow } from '../../src/quota/rate-limit-headers.js';
import { leaseReplicas, NO_BANS } from '../helpers/lease-replicas.js';
import { redisForFile } from '../helpers/redis-for-file.js';

// Remaining on an answer Redis decided for a replica that holds a lease of the key: Redis counts
// the units out on every lease as used, this replica's own unused ones too, which it can still
// admit. They are added back, as on a leased answer, so the answer tells exactly what is left when
// no other replica holds units, and less by their units otherwise; never more. A block granted
// after Redis decided (its units not in that count) is not added.

const redis = redisForFile();
const clock = { nowMs: 0 };
const replicas = leaseReplicas(clock);
const QUOTA: Quota = { perMinute: 1000, perDay: 1_000_000 };

afterEach(() => replicas.closeAll());

const remaining = (outcome: QuotaOutcome) => reportedWindow(QUOTA, outcome).remaining;

describe('a Redis-decided answer on a lease holder', { timeout: 60_000 }, () => {
  it("tells what is left: its own unused units are added back, other replicas' are not", async () => {
    clock.nowMs = Date.UTC(2030, 0, 10, 12, 0, 5);
    const subject = 'store-headers';
    const url = redis.server().url;
    const a = await replicas.open(url);
    const b = await replicas.open(url);
    let admitted = await replicas.untilLeased(a, subject, QUOTA);
    // Decided by Redis (as when the lease cannot cover the request), on the holder.
    const decided = await a.store.consume(subject, QUOTA, NO_BANS, 1);
    expect(decided.verdict).toBe('allowed');
    admitted++;
    const heldA = a.leases.held(subject);
    expect(remaining(decided)).toBe(QUOTA.perMinute - admitted - heldA);
    expect(remaining(a.leases.told(subject, decided))).toBe(QUOTA.perMinute - admitted);

    // Another replica takes a lease: the holder's next Redis answer is short by exactly its units.
    admitted += await replicas.untilLeased(b, subject, QUOTA);
    const heldB = b.leases.held(subject);
    const next = await a.store.consume(subject, QUOTA, NO_BANS, 1);
    admitted++;
    expect(remaining(a.leases.told(subject, next))).toBe(QUOTA.perMinute - admitted - heldB);
  });

  it('adds nothing for a block granted after the decision', async () => {
    clock.nowMs = Date.UTC(2030, 0, 10, 12, 1, 5);
    const subject = 'store-headers-late-block';
    const a = await replicas.open(redis.server().url);
    const b = await replicas.open(redis.server().url);
    // Decided before any lease of the key exists on `a`, while `b`'s is out (so the answer has a sequence number).
    await replicas.untilLeased(b, subject, QUOTA);
    const early = await a.store.consume(subject, QUOTA, NO_BANS, 1);
    expect(early.seq).toBeGreaterThan(0);
    await replicas.untilLeased(a, subject, QUOTA);
    expect(remaining(a.leases.told(subject, early))).toBe(remaining(early));
    expect(a.leases.held(subject)).toBeGreaterThan(0);
  });
});
