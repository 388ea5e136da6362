import { randomBytes } from 'node:crypto';
import type { BanPolicy, Quota } from '../../config/plans-schema.js';
import type { Logger } from '../../observability/log.js';
import type { Metrics } from '../../observability/metrics.js';
import type { Settlement } from '../../quota/quota-state.js';
import type { QuotaStore } from '../../store/quota-store.js';

/** Tries of one settlement: the first, then after each of these pauses (a Redis failover takes seconds). */
const RETRY_PAUSES_MS = [200, 1000, 5000];

/** One reservation to settle: whose, under which limits, and to what. */
export interface SettleOrder {
  subject: string;
  quota: Quota;
  ban: BanPolicy;
  settlement: Settlement;
  /** For the log of a shortfall (never a key). */
  keyId: string;
}

/**
 * Settles reservations off the request path: called once a client's answer has been sent, it
 * never holds one. A settlement that fails (the store unreachable, a timeout) is tried again a
 * bounded number of times, under the same id, so the store applies it once whichever try got
 * through (SETTLE_SCRIPT's marker); after the last, the reservation stands and the failure is
 * counted. A store without `settle` leaves every reservation as it stands.
 */
export class ReservationSettler {
  /** This process's prefix of settlement ids (random), then a counter: unique across replicas without coordination. */
  private readonly prefix = randomBytes(6).toString('hex');
  private next = 0;
  /** Settlements not finished yet (tests and shutdown wait for them). */
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly store: QuotaStore,
    private readonly metrics: Metrics,
    private readonly logger: Logger,
  ) {}

  settle(order: SettleOrder): void {
    if (!this.store.settle || order.settlement.cost === order.settlement.reserve) return;
    const id = `${this.prefix}:${(this.next++).toString(36)}`;
    const run = this.tries(order, id).finally(() => this.inFlight.delete(run));
    this.inFlight.add(run);
  }

  /** Resolves once every settlement started so far has finished (applied or given up). */
  async idle(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  private async tries(order: SettleOrder, id: string): Promise<void> {
    const { subject, quota, ban, settlement } = order;
    for (let attempt = 0; ; attempt++) {
      try {
        const result = await this.store.settle!(subject, quota, ban, { ...settlement, id });
        if (result.shortfall > 0) {
          this.metrics.creditShortfallUnits.inc(result.shortfall);
          this.logger.warn(
            { keyId: order.keyId, shortfall: result.shortfall, cost: settlement.cost, reserve: settlement.reserve },
            'reported cost exceeded the credit balance: the balance is at zero, the rest charged to the windows only',
          );
        }
        return;
      } catch (err) {
        const pauseMs = RETRY_PAUSES_MS[attempt];
        if (pauseMs === undefined) {
          this.metrics.costSettleFailures.inc();
          this.logger.error(
            { err: { message: (err as Error).message }, keyId: order.keyId, cost: settlement.cost, reserve: settlement.reserve },
            'could not settle a reported cost: the reservation stands',
          );
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, pauseMs).unref());
      }
    }
  }
}
