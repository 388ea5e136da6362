import { describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import type { RuleCharge } from '../../src/quota/limit-rules.js';
import { RECALL_GRACE_MS } from '../../src/quota/quota-leases.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import type { LeaseGrant, LeaseRequest } from '../../src/store/quota-store.js';
import { redisForFile } from '../helpers/redis-for-file.js';

// A lease lapses at its end ('le') in Redis, but its holder's give-back of the unused units comes
// later (its sweep, its round trip, a loaded machine). A request Redis cannot fit in between lacks
// units that are on their way: it is a recall (quota-script.ts CLOCK's unitsOut), decided again
// once they are back, for a plan's window and for a limit rule's counter alike. Past
// RECALL_GRACE_MS after the end the holder is taken for lost, and the refusal is final. One real
// redis-server and one injected clock: the holder's give-back comes exactly when the test says.

const redis = redisForFile();

const LEASE_MS = 1000;
const quota: Quota = { perMinute: 30, perDay: 1_000_000 };
const wide: Quota = { perMinute: 1_000_000, perDay: 1_000_000 };
const ban: BanPolicy = { afterRejections: 1000, window: 60, duration: 60 };
const rule = (digest: string): RuleCharge => ({
  name: 'lapse',
  digest,
  limit: 30,
  windowMs: 60_000,
  gcra: false,
  intervalUs: 0,
  burst: 0,
  cost: 1,
});

/** A holder's ask for `want` units, or the give-back of `left` unused units of `grant` ending its lease. */
const ask = (want: number, giveBack?: { grant: LeaseGrant; left: number }): LeaseRequest => ({
  want,
  divisor: 1,
  minBlock: 1,
  giveBack: giveBack?.left ?? 0,
  giveBackMinuteStartMs: giveBack?.grant.minuteStartMs ?? 0,
  giveBackDayStartMs: giveBack?.grant.dayStartMs ?? 0,
  leaseMs: LEASE_MS,
  holder: 'late',
  ends: giveBack !== undefined,
  heldUntilMs: giveBack ? giveBack.grant.nowMs + LEASE_MS : 0,
  giveBackNo: giveBack ? 1 : 0,
  // (A rule counter's epoch rides where a credit balance's does: redis-limit-rules.ts.)
  giveBackCreditEpoch: giveBack?.grant.creditEpoch ?? 0,
  giveBackHashEpoch: giveBack?.grant.hashEpoch ?? 0,
});

/** Two parts of the same kind: a plan's window, and a limit rule's counter (on a plan far from its limits). */
const kinds = [
  {
    kind: "a plan's window",
    reserve: (store: RedisQuotaStore, subject: string, request: LeaseRequest) => store.reserve(subject, quota, ban, request),
    decide: (store: RedisQuotaStore, subject: string, recall?: Parameters<RedisQuotaStore['consume']>[5]) =>
      store.consume(subject, quota, ban, 1, undefined, recall),
  },
  {
    kind: "a limit rule's counter",
    reserve: (store: RedisQuotaStore, subject: string, request: LeaseRequest) => store.reserveRule!(rule(subject), request),
    decide: (store: RedisQuotaStore, subject: string, recall?: Parameters<RedisQuotaStore['consume']>[5]) =>
      store.consumeRules(subject, wide, ban, 1, [rule(subject)], recall),
  },
];

describe('a lapsed lease whose units are not back yet', () => {
  for (const { kind, reserve, decide } of kinds) {
    for (const [when, pastEndMs, recalled] of [
      ['within the grace after its end', RECALL_GRACE_MS - 1, true],
      ['once the grace after its end has passed', RECALL_GRACE_MS, false],
    ] as const) {
      it(`${kind}: a request that lacks its units ${when} is ${recalled ? 'recalled, then admitted' : 'refused, finally'}`, async () => {
        const clock = { nowMs: Date.UTC(2030, 0, 10, 12, 0, 5) };
        const store = new RedisQuotaStore(redis.client(), () => clock.nowMs);
        const subject = `lapsed-${kind.length}-${pastEndMs}`;
        try {
          // A holder takes 10 of the 30 and uses none; the other 20 are admitted by Redis.
          const grant = await reserve(store, subject, ask(10));
          expect(grant.granted).toBe(10);
          for (let i = 0; i < 20; i++) expect((await decide(store, subject)).verdict).toBe('allowed');
          // Its lease has lapsed in Redis; its give-back comes only when a recall asks for it.
          clock.nowMs += LEASE_MS + pastEndMs;
          let recalls = 0;
          const outcome = await decide(store, subject, async () => {
            recalls++;
            await reserve(store, subject, ask(0, { grant, left: 10 }));
          });
          expect({ verdict: outcome.verdict, recalls }).toEqual(
            recalled ? { verdict: 'allowed', recalls: 1 } : { verdict: 'limited', recalls: 0 },
          );
        } finally {
          await store.close();
        }
      });
    }
  }
});
