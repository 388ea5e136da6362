import type { RecallWait } from '../store/quota-store.js';
import { commandTimedOut } from '../store/store-health.js';
import type { RequestContext } from './context.js';

/**
 * One request's waits on Redis (its key record's read, its limit rules' concurrency slots
 * (rule-slots.ts), a lease ask it joined, its quota decision) share one redis.commandTimeoutMs,
 * counted from when the first began (ctx.redisWaitSinceMs).
 * ioredis times each command from its own write, so a request that waited for its key record and
 * then for its decision (or for a lease ask, then for the decision) could be held on Redis for up
 * to two timeouts, as once in a Sentinel failover under quota.waitForReplica, when the commands
 * queued behind the turns' WAITs: 300 ms with the shipped 250 (docs/operations.md, "Failure modes").
 *
 * Only a wait that follows another is cut here (a request's first wait is ioredis's to time out:
 * no timer per request on the hot path), and a decision of two calls (a plan's concurrency slot
 * taken alone, then its limit rules: enforce-quota.ts), bound as a whole. What is left of the time is its bound; at that bound it
 * fails as a timed-out command does, so store-health.ts judges it alike (behind a stalled loop,
 * or while Redis still answers: 503 gateway_overloaded; a silent Redis: the degraded mode). What
 * it had sent runs on in Redis, as a timed-out command's does (counted, not admitted); nothing
 * more is sent or taken for the request (`ctx.redisWaitOver`: a recall's decision again, a lease's
 * units, the decision after a concurrency slot; a slot granted after it is given back). One exception: on a Cluster, a request with limit
 * rules reserves the rules' units, then asks the plan (redis-limit-rules.ts), and those steps run
 * to their end: its plan may be counted too, as a request in flight at a loss is.
 */

/** What is left of the request's time on Redis, or undefined while no wait of it has begun it. */
export function redisWaitLeftMs(ctx: RequestContext, commandTimeoutMs: number): number | undefined {
  const since = ctx.redisWaitSinceMs;
  return since === undefined ? undefined : since + commandTimeoutMs - performance.now();
}

/**
 * `send` as one of `ctx`'s waits on Redis: its first (its time starts now, and ioredis times the
 * command), a later one cut at what is left of its time, or, with nothing left, not sent at all: a
 * timed-out command's error.
 */
export function waitOnRedis<T>(ctx: RequestContext, commandTimeoutMs: number, send: () => Promise<T>): Promise<T> {
  const left = redisWaitLeftMs(ctx, commandTimeoutMs);
  if (left === undefined) {
    ctx.redisWaitSinceMs = performance.now();
    return send();
  }
  if (left <= 0) {
    ctx.redisWaitOver = true;
    return Promise.reject(commandTimedOut());
  }
  return new LaterRedisWait(ctx, left).bound(send());
}

/** A wait of `ctx` on Redis after an earlier one, cut at what is left of its time (`leftMs`, above 0). */
export class LaterRedisWait {
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly ctx: RequestContext,
    private readonly leftMs: number,
  ) {}

  /** `waiting`, or a timed-out command's error once the request's time is up, whichever comes first. */
  bound<T>(waiting: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.timer = setTimeout(() => {
        this.ctx.redisWaitOver = true;
        reject(commandTimedOut());
      }, this.leftMs);
      waiting.then(
        (value) => {
          clearTimeout(this.timer);
          resolve(value);
        },
        (err: unknown) => {
          clearTimeout(this.timer);
          reject(err);
        },
      );
    });
  }

  /**
   * `recall` for this request: while it waits for leased units to come back it waits on other
   * replicas, not on Redis, and its decision after them is ioredis's to time out (no cut); a
   * request that gave up meanwhile is not decided again.
   */
  recall(recall: RecallWait): RecallWait {
    return (subject, recalled) => {
      if (this.ctx.redisWaitOver) return Promise.reject(commandTimedOut());
      clearTimeout(this.timer);
      return recall(subject, recalled);
    };
  }
}
