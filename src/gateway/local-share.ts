import { LRUCache } from 'lru-cache';
import type { Quota } from '../config/plans-schema.js';
import type { QuotaOutcome } from '../quota/quota-state.js';
import { periodsAt, pick } from '../quota/calendar.js';
import { MINUTE_MS, windowStartMs } from '../quota/windows.js';

interface Heard {
  /** The store's clock when it decided: the windows the counts belong to follow from it. */
  nowMs: number;
  minuteCount: number;
  dayCount: number;
  monthCount: number;
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
    // Every store decision lands here: a subject heard before is updated in place (and made the
    // most recent), not given a new entry each time.
    const heard = this.heard.get(subject);
    if (heard) {
      heard.nowMs = outcome.nowMs;
      heard.minuteCount = outcome.minuteCount;
      heard.dayCount = outcome.dayCount;
      heard.monthCount = outcome.monthCount ?? 0;
      return;
    }
    this.heard.set(subject, {
      nowMs: outcome.nowMs,
      minuteCount: outcome.minuteCount,
      dayCount: outcome.dayCount,
      monthCount: outcome.monthCount ?? 0,
    });
  }

  /**
   * The limits this replica enforces alone at `nowMs`. The minute is a fixed window here even for
   * a gcra plan: a share of a cell rate has no meaning once the replicas cannot see each other.
   */
  shareOf(subject: string, quota: Quota, nowMs: number): Quota {
    const { minuteCount: minuteUsed, dayCount: dayUsed, monthCount: monthUsed } = this.usedAt(subject, quota, nowMs);
    const share = (limit: number, used: number) => Math.floor(Math.max(0, limit - used) / this.replicas);
    const { burst: _burst, ...rest } = quota;
    return {
      ...rest,
      algorithm: 'fixed',
      perMinute: share(quota.perMinute, minuteUsed),
      perDay: share(quota.perDay, dayUsed),
      ...(quota.perMonth !== undefined && { perMonth: share(quota.perMonth, monthUsed) }),
    };
  }

  /**
   * The counts last heard for `subject` in the windows current at `nowMs` (the day and month of
   * the quota's calendar): 0 for a window that rolled since, or one never heard of.
   */
  usedAt(subject: string, quota: Quota, nowMs: number): Omit<Heard, 'nowMs'> {
    const heard = this.heard.get(subject);
    if (!heard) return { minuteCount: 0, dayCount: 0, monthCount: 0 };
    const now = periodsAt(nowMs, quota.calendar);
    const then = periodsAt(heard.nowMs, quota.calendar);
    const minuteSame = windowStartMs(heard.nowMs, MINUTE_MS) === windowStartMs(nowMs, MINUTE_MS);
    const daySame = pick(then.day, heard.nowMs)[0] === pick(now.day, nowMs)[0];
    const monthSame = pick(then.month, heard.nowMs)[0] === pick(now.month, nowMs)[0];
    return {
      minuteCount: minuteSame ? heard.minuteCount : 0,
      dayCount: daySame ? heard.dayCount : 0,
      monthCount: monthSame ? heard.monthCount : 0,
    };
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
    ...(quota.perMonth !== undefined && { monthCount: quota.perMonth - ((share.perMonth ?? 0) - (outcome.monthCount ?? 0)) }),
    minuteTatUs: 0,
  };
}
