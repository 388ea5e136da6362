import { LRUCache } from 'lru-cache';
import type { Quota } from '../config/plans-schema.js';
import type { QuotaOutcome } from '../quota/quota-state.js';
import { DAY_MS, MINUTE_MS, windowStartMs } from '../quota/windows.js';

interface Heard {
  minuteStartMs: number;
  minuteCount: number;
  dayStartMs: number;
  dayCount: number;
}

/**
 * What each subject (a key, or an owner: quota-subject.ts) had used when this replica last heard
 * from Redis, and from it the budget the replica may admit alone while Redis is unreachable
 * (`local` mode): its share of what was **left** in each window, never of the whole limit. A
 * window it never heard of (a key first seen during the outage, or a minute that began since) gets
 * its share of the whole limit. So the fleet admits at most the limit, plus, for windows not heard
 * of, what the other replicas admitted through Redis before they lost it too
 * (docs/operations.md, "Failure modes").
 */
export class LocalShare {
  private readonly heard: LRUCache<string, Heard>;

  constructor(
    maxEntries: number,
    private readonly replicas: number,
  ) {
    this.heard = new LRUCache({ max: maxEntries });
  }

  /** A decision of the shared store (allowed or not: its counts are the truth as of then). */
  remember(subject: string, outcome: QuotaOutcome): void {
    this.heard.set(subject, {
      minuteStartMs: windowStartMs(outcome.nowMs, MINUTE_MS),
      minuteCount: outcome.minuteCount,
      dayStartMs: windowStartMs(outcome.nowMs, DAY_MS),
      dayCount: outcome.dayCount,
    });
  }

  /**
   * The limits this replica enforces alone at `nowMs`. The minute is a fixed window here even for
   * a gcra plan: a share of a cell rate has no meaning once the replicas cannot see each other.
   */
  shareOf(subject: string, quota: Quota, nowMs: number): Quota {
    const heard = this.heard.get(subject);
    const minuteUsed = heard?.minuteStartMs === windowStartMs(nowMs, MINUTE_MS) ? heard.minuteCount : 0;
    const dayUsed = heard?.dayStartMs === windowStartMs(nowMs, DAY_MS) ? heard.dayCount : 0;
    const share = (limit: number, used: number) => Math.floor(Math.max(0, limit - used) / this.replicas);
    const { burst: _burst, ...rest } = quota;
    return { ...rest, algorithm: 'fixed', perMinute: share(quota.perMinute, minuteUsed), perDay: share(quota.perDay, dayUsed) };
  }
}

/**
 * A decision made on a share, told in the terms of the whole quota: the limit is the plan's, and
 * what remains is what this replica may still admit alone (never more than is really left).
 */
export function inWholeTerms(quota: Quota, share: Quota, outcome: QuotaOutcome): QuotaOutcome {
  return {
    ...outcome,
    minuteCount: quota.perMinute - (share.perMinute - outcome.minuteCount),
    dayCount: quota.perDay - (share.perDay - outcome.dayCount),
    minuteTatUs: 0,
  };
}
