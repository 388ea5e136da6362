import { randomUUID } from 'node:crypto';
import type { Logger } from '../observability/log.js';
import type { QuotaOutcome } from '../quota/quota-state.js';
import type { Quota } from '../config/plans-schema.js';
import { periodsAt, pick } from '../quota/calendar.js';
import { gcraMinute } from '../quota/gcra.js';
import { addUsage, usageHourStartMs, usagePeriodsAt } from '../quota/usage-hours.js';
import { MINUTE_MS, windowStartMs } from '../quota/windows.js';
import type { DegradedAdmissions, QuotaStore } from '../store/quota-store.js';

const NO_CREDITS = { spent: 0, leased: false };

/** Retries of a flush that failed (a second outage) come this often while any is left. */
const RETRY_MS = 1000;

/**
 * What this replica admitted (and banned) on its own while Redis was unreachable, per subject, to
 * be added to Redis once it is back: each batch carries this process's id and its own sequence
 * number, and the store applies a batch once whatever happens (`QuotaStore.reconcile`: a second
 * outage cutting the flush, a retry, Redis restarted), so a batch is never counted twice. A batch
 * holds the windows it was admitted in; the store adds only to those that have not rolled yet.
 * A replica killed before its flush loses its batches: at most its local share of each window
 * (local-share.ts), documented in docs/operations.md ("Failure modes").
 */
export class DegradedLedger {
  readonly replicaId = randomUUID();
  private seq = 0;
  /** Admissions still being added to, per subject. */
  private readonly open = new Map<string, DegradedAdmissions>();
  /** Batches sealed for a flush (their sequence fixed), until the store has applied them. */
  private readonly sealed: Array<{ subject: string; batch: DegradedAdmissions }> = [];
  private flushing?: Promise<boolean>;
  private retry?: NodeJS.Timeout;

  constructor(
    private readonly store: QuotaStore,
    private readonly logger: Logger,
    /** The log line of each applied flush (tests and operators count the units in it). */
    private readonly flushedMessage = 'degraded-mode admissions added to redis',
    /**
     * Unreplicated writes: a gcra plan's admissions charge the TAT again when added (a master
     * that lost them lost their cells too). Degraded-mode admissions do not: they were never on
     * Redis's TAT line, and the local share bounds them.
     */
    private readonly chargesTat = false,
  ) {}

  /**
   * A decision taken without Redis (`local` mode's store, or `open` mode's admit-all at `nowMs`),
   * in the windows of `quota`'s calendar (its zone's day, its month: the ones the store counts in).
   * `requests`: the requests it is in the usage rows (0 for a lease's grant: units, no request).
   * `credits`: prepaid credits it spent, taken from the balance; `leased`: the units and credits
   * are held by a lease's block (an unreplicated grant), whose give-back returns the unused ones.
   */
  record(
    subject: string,
    outcome: Pick<QuotaOutcome, 'verdict' | 'nowMs' | 'cost' | 'bannedUntilMs'>,
    quota?: Quota,
    requests = 1,
    credits: { spent: number; leased: boolean } = NO_CREDITS,
  ): void {
    const admitted = outcome.verdict === 'allowed' ? outcome.cost : 0;
    const periods = periodsAt(outcome.nowMs, quota?.calendar);
    const minuteStartMs = windowStartMs(outcome.nowMs, MINUTE_MS);
    const dayStartMs = pick(periods.day, outcome.nowMs)[0];
    const monthStartMs = pick(periods.month, outcome.nowMs)[0];
    const calendar = quota?.calendar;
    let batch = this.open.get(subject);
    if (!batch) {
      batch = { seq: 0, minuteStartMs, minuteUnits: 0, dayStartMs, dayUnits: 0, monthStartMs, monthUnits: 0, calendar, bannedUntilMs: 0 };
      this.open.set(subject, batch);
    }
    // Units of a window that has rolled would be dropped by the store anyway.
    const leased = batch.leasedUnits;
    if (batch.minuteStartMs !== minuteStartMs) {
      Object.assign(batch, { minuteStartMs, minuteUnits: 0 });
      if (leased) leased.minute = 0;
    }
    if (batch.dayStartMs !== dayStartMs) {
      Object.assign(batch, { dayStartMs, dayUnits: 0 });
      if (leased) leased.day = 0;
    }
    if (batch.monthStartMs !== monthStartMs) {
      Object.assign(batch, { monthStartMs, monthUnits: 0 });
      if (leased) leased.month = 0;
    }
    batch.calendar = calendar;
    batch.minuteUnits += admitted;
    batch.dayUnits += admitted;
    // Only a quota with a month counts one (as the quota script).
    if (quota?.perMonth !== undefined) batch.monthUnits = (batch.monthUnits ?? 0) + admitted;
    if (credits.leased && admitted > 0) {
      const units = (batch.leasedUnits ??= { minute: 0, day: 0, month: 0 });
      units.minute += admitted;
      units.day += admitted;
      if (quota?.perMonth !== undefined) units.month += admitted;
    }
    if (this.chargesTat && admitted > 0 && quota?.algorithm === 'gcra') {
      const { intervalUs, burst } = gcraMinute(quota);
      batch.gcra ??= { tatUs: 0, toleranceUs: burst * intervalUs, lastUs: 0 };
      batch.gcra.tatUs += admitted * intervalUs;
      batch.gcra.lastUs = Math.max(batch.gcra.lastUs, outcome.nowMs * 1000);
    }
    batch.bannedUntilMs = Math.max(batch.bannedUntilMs, outcome.bannedUntilMs);
    // The balance is not a window: its credits count whenever they were spent.
    if (credits.spent > 0) {
      batch.credits = (batch.credits ?? 0) + credits.spent;
      if (credits.leased) batch.leasedCredits = (batch.leasedCredits ?? 0) + credits.spent;
    }
    // Usage for invoicing: every hour of the outage, refusals too, whether or not its windows roll.
    const at = usagePeriodsAt(outcome.nowMs, calendar);
    const hourStartMs = usageHourStartMs(at.dayStartMs, outcome.nowMs);
    batch.usage ??= [];
    let hour = batch.usage.find((h) => h.hourStartMs === hourStartMs && h.dayStartMs === at.dayStartMs);
    if (!hour) batch.usage.push((hour = { ...at, hourStartMs, admitted: 0, refused: 0, units: 0, credits: 0 }));
    addUsage(hour, {
      admitted: admitted > 0 ? requests : 0,
      refused: outcome.verdict === 'allowed' ? 0 : requests,
      units: admitted,
      credits: credits.spent,
    });
  }

  /** Forgets what was recorded and not yet sealed for a flush (Redis turned out to hold it). */
  discard(): void {
    this.open.clear();
  }

  /** Nothing left to add to Redis. */
  get empty(): boolean {
    return this.open.size === 0 && this.sealed.length === 0;
  }

  /**
   * Adds everything recorded so far to Redis; resolves true once all of it is applied. A batch
   * that fails stays sealed, with its sequence number, and is tried again (every second, and at
   * the next call) until Redis has it.
   */
  flush(): Promise<boolean> {
    this.flushing ??= this.flushOnce().finally(() => (this.flushing = undefined));
    return this.flushing;
  }

  private async flushOnce(): Promise<boolean> {
    for (const [subject, batch] of this.open) this.sealed.push({ subject, batch: { ...batch, seq: ++this.seq } });
    this.open.clear();
    const results = await Promise.all(
      this.sealed.map(({ subject, batch }) =>
        this.store.reconcile!(subject, this.replicaId, batch).then(
          () => true,
          () => false,
        ),
      ),
    );
    const applied = this.sealed.filter((_, i) => results[i]);
    const left = this.sealed.filter((_, i) => !results[i]);
    this.sealed.splice(0, this.sealed.length, ...left);
    if (applied.length > 0) {
      const units = applied.reduce((sum, { batch }) => sum + batch.dayUnits, 0);
      this.logger.info({ subjects: applied.length, units }, this.flushedMessage);
    }
    if (left.length > 0 && !this.retry) {
      this.retry = setTimeout(() => {
        this.retry = undefined;
        void this.flush();
      }, RETRY_MS);
      this.retry.unref();
    }
    return left.length === 0 && this.open.size === 0;
  }

  close(): void {
    clearTimeout(this.retry);
  }
}
