import type { BanPolicy, Quota } from '../config/plans-schema.js';
import type { LeaseRequest } from '../store/quota-store.js';

/** A failed give-back is tried again this often, until the store has it (or shutdown). */
const RETRY_MS = 1000;
/** And for at most this long: after a day, its minute and day have rolled and credit nothing. */
const RETRY_FOR_MS = 86_400_000;

type Send = (subject: string, quota: Quota, ban: BanPolicy, request: LeaseRequest) => Promise<unknown>;

/**
 * The give-backs of one replica's ended leases (quota-leases.ts, rule 5), delivered exactly once
 * whatever Redis does meanwhile. Each carries a number of its own (`giveBackNo`, growing with every
 * give-back of this replica) and those of one key go out one after the other, in that order; one
 * that fails (Redis unreachable, a timeout, a reset) is tried again every second, the key's later
 * ones waiting behind it. Redis keeps, per key and replica, the highest number it applied
 * (LEASE_SCRIPT, 'gb:<holder>'), so a retry of a give-back that Redis ran but whose reply was lost
 * credits nothing: never twice. The order is what makes "highest applied" enough.
 */
export class LeaseGiveBacks {
  private lastNo = 0;
  /** Per subject: the last give-back queued, which its next one waits for. */
  private readonly queues = new Map<string, Promise<void>>();
  private failing = 0;
  private dropped = 0;
  private closing = false;
  /** Pending retry waits: shutdown cuts them short. */
  private readonly waits = new Set<() => void>();

  constructor(
    private readonly send: Send,
    private readonly retryMs = RETRY_MS,
  ) {}

  /** Give-backs that failed and wait for their next try (tests, metrics). */
  get pending(): number {
    return this.failing;
  }

  /** Give-backs given up on (shutdown during an outage, or after a day of retries). */
  get abandoned(): number {
    return this.dropped;
  }

  /** Resolves once the store has applied it, or it was given up on. */
  give(subject: string, quota: Quota, ban: BanPolicy, request: LeaseRequest): Promise<void> {
    const numbered: LeaseRequest =
      request.giveBack > 0 || (request.giveBackRequests ?? 0) > 0 ? { ...request, giveBackNo: ++this.lastNo } : request;
    const queued = (this.queues.get(subject) ?? Promise.resolve()).then(() => this.deliver(subject, quota, ban, numbered));
    this.queues.set(subject, queued);
    void queued.finally(() => {
      if (this.queues.get(subject) === queued) this.queues.delete(subject);
    });
    return queued;
  }

  /** Shutdown: each give-back still failing is tried once more, then dropped. */
  close(): void {
    this.closing = true;
    for (const wake of [...this.waits]) wake();
  }

  private async deliver(subject: string, quota: Quota, ban: BanPolicy, request: LeaseRequest): Promise<void> {
    const sinceMs = Date.now();
    let failed = false;
    try {
      for (;;) {
        try {
          await this.send(subject, quota, ban, request);
          return;
        } catch {
          // Unreachable, timed out or reset: Redis may or may not have run it; its number decides.
        }
        if (!failed) this.failing++;
        failed = true;
        if (this.closing || Date.now() - sinceMs >= RETRY_FOR_MS) {
          this.dropped++;
          return;
        }
        await this.pause();
      }
    } finally {
      if (failed) this.failing--;
    }
  }

  private pause(): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.waits.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, this.retryMs);
      timer.unref();
      this.waits.add(wake);
    });
  }
}
