import type { Quota } from '../config/plans-schema.js';
import type { Logger } from '../observability/log.js';
import type { QuotaOutcome } from '../quota/quota-state.js';
import type { QuotaStore } from '../store/quota-store.js';
import type { TurnMark } from '../store/redis/turn-marks.js';
import { DegradedLedger } from './degraded-ledger.js';

/** One decision (or lease grant) a turn wrote that no replica acknowledged in time. */
export interface KeptWrite {
  subject: string;
  admitted: Pick<QuotaOutcome, 'verdict' | 'nowMs' | 'cost' | 'bannedUntilMs'>;
  quota: Quota;
  /** The requests it is (a lease's grant: 0, its requests are counted at its give-back). */
  requests: number;
}

/** What one turn wrote that no replica acknowledged in time (unreplicated-writes.ts). */
export interface KeptTurn {
  mark: TurnMark;
  writes: KeptWrite[];
  /** Units leases gave back in it. */
  givenBack: number;
}

/** The log line of each batch of kept writes added to a master that lacked them. */
export const ADDED_MESSAGE = 'unreplicated quota writes added to redis';

/** Adds `write` to `ledger`, to be added to Redis as the master that lost it had counted it. */
export function recordKept(ledger: DegradedLedger, { subject, admitted, quota, requests }: KeptWrite): void {
  // The balance the master took them from: a lease's grant (0 requests) holds them in its block.
  const spent = quota.credits === 'required' && admitted.verdict === 'allowed' ? admitted.cost : 0;
  ledger.record(subject, admitted, quota, requests, { spent, leased: requests === 0 });
}

/**
 * The kept turns of one connection folded together once too many writes were kept: while no
 * replica acknowledges (one down for hours), every turn is kept, and one entry per request would
 * grow without end. Folded, they are summed per subject and window as degraded mode sums its
 * admissions (degraded-ledger.ts): bounded by the subjects and the hours, not the requests.
 * What folding gives up is the turn-by-turn answer after a failover: a master whose marker
 * (turn-marks.ts) reaches the highest turn folded holds them all, one whose marker is below the
 * lowest lacks them all, and one in between (a promoted replica that got some of them) gets them
 * all added again: some counted twice, none admitted twice.
 */
export class FoldedTurns {
  fromSeq = Number.POSITIVE_INFINITY;
  toSeq = 0;
  turns = 0;
  givenBack = 0;
  readonly ledger: DegradedLedger;

  constructor(
    readonly connection: number,
    store: QuotaStore,
    logger: Logger,
  ) {
    this.ledger = new DegradedLedger(store, logger, ADDED_MESSAGE, true);
  }

  add(turn: KeptTurn): void {
    this.fromSeq = Math.min(this.fromSeq, turn.mark.seq);
    this.toSeq = Math.max(this.toSeq, turn.mark.seq);
    this.turns++;
    this.givenBack += turn.givenBack;
    for (const write of turn.writes) recordKept(this.ledger, write);
  }
}
