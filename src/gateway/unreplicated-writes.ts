import type { Quota } from '../config/plans-schema.js';
import type { Logger } from '../observability/log.js';
import type { Metrics } from '../observability/metrics.js';
import type { QuotaOutcome } from '../quota/quota-state.js';
import type { QuotaStore } from '../store/quota-store.js';
import type { RedisClient } from '../store/redis/connect.js';
import type { ReplicaWaitListener } from '../store/redis/replica-wait.js';
import { TurnMarks, type TurnMark } from '../store/redis/turn-marks.js';
import { DegradedLedger } from './degraded-ledger.js';

/** A failed look-up of the markers (a second outage) is tried again this often. */
const RETRY_MS = 1000;

/** What one turn wrote that no replica acknowledged in time. */
interface KeptTurn {
  mark: TurnMark;
  writes: Array<{
    subject: string;
    admitted: Pick<QuotaOutcome, 'verdict' | 'nowMs' | 'cost' | 'bannedUntilMs'>;
    quota: Quota;
    requests: number;
  }>;
  /** Units leases gave back in it (unreplicatedGiveBack). */
  givenBack: number;
}

/**
 * quota.waitForReplica's answer to a WAIT that timed out: the request gets what the master
 * decided (admitted or refused), it is counted in tollgate_quota_unreplicated_total, and the
 * writes of its turn are kept here until their fate is known:
 * - a later WAIT on the same connection is acknowledged: the replicas have them (the replication
 *   stream is ordered), they are forgotten;
 * - the connection to the master is lost first: once connected again (to a new master after a
 *   failover: ioredis follows Sentinel), the marker of the lost connection (turn-marks.ts) says
 *   which turns the master answering now holds. Those it holds are forgotten (the same master
 *   after a mere reconnection holds them all); the others died with the old master and are added
 *   to this one, once (degraded-ledger.ts): windows, usage, bans and prepaid credits.
 *
 * Why not refuse or shed instead: the write is in the master's memory, so the decision is as
 * exact as any other unless a failover follows before it is sent; and a WAIT times out whenever a
 * replica is slow, down or resyncing, which would make a replica's outage a gateway outage.
 */
export class UnreplicatedWrites implements ReplicaWaitListener {
  readonly marks: TurnMarks;
  private readonly ledger: DegradedLedger;
  /** The turns whose WAIT failed, in the order their answers came. */
  private kept: KeptTurn[] = [];
  private checking?: Promise<void>;
  private retry?: NodeJS.Timeout;

  constructor(
    store: QuotaStore,
    redis: RedisClient,
    private readonly logger: Logger,
    private readonly metrics: Metrics,
  ) {
    this.marks = new TurnMarks(redis);
    this.ledger = new DegradedLedger(store, logger, 'unreplicated quota writes added to redis');
    // Connected again (after a loss, the writes of the turns cut by it are kept by then).
    redis.on('ready', () => void this.check());
  }

  unreplicated(
    subject: string,
    admitted: Pick<QuotaOutcome, 'verdict' | 'nowMs' | 'cost' | 'bannedUntilMs'>,
    quota: Quota,
    mark: TurnMark,
    requests = 1,
  ): void {
    this.metrics.quotaUnreplicated.inc();
    this.turnOf(mark).writes.push({ subject, admitted, quota, requests });
  }

  unreplicatedGiveBack(_subject: string, units: number, mark: TurnMark): void {
    this.turnOf(mark).givenBack += units;
  }

  /** The kept turn `mark`, kept from now on if it was not yet. */
  private turnOf(mark: TurnMark): KeptTurn {
    const last = this.kept.at(-1);
    if (last?.mark.connection === mark.connection && last.mark.seq === mark.seq) return last;
    const turn: KeptTurn = { mark, writes: [], givenBack: 0 };
    this.kept.push(turn);
    return turn;
  }

  replicated(mark: TurnMark): void {
    if (this.kept.length === 0) return;
    this.kept = this.kept.filter((turn) => turn.mark.connection !== mark.connection || turn.mark.seq > mark.seq);
  }

  /** Settles the kept turns of connections lost since (one look-up at a time). */
  private check(): Promise<void> {
    this.checking ??= this.checkLost().finally(() => (this.checking = undefined));
    return this.checking;
  }

  private async checkLost(): Promise<void> {
    for (;;) {
      const now = this.marks.current();
      const lost = this.kept.filter((turn) => turn.mark.connection < now);
      if (lost.length === 0) return;
      const connections = [...new Set(lost.map((turn) => turn.mark.connection))];
      let applied: Map<number, number>;
      try {
        applied = new Map(await Promise.all(connections.map(async (c) => [c, await this.marks.applied(c)] as const)));
      } catch {
        // Lost again before the answer: tried again (and at the next reconnection).
        clearTimeout(this.retry);
        this.retry = setTimeout(() => void this.check(), RETRY_MS);
        this.retry.unref();
        return;
      }
      this.kept = this.kept.filter((turn) => !lost.includes(turn));
      const missing = lost.filter((turn) => turn.mark.seq > applied.get(turn.mark.connection)!);
      for (const { writes } of missing) {
        for (const { subject, admitted, quota, requests } of writes) {
          // The balance the master took them from: a lease's grant (0 requests) holds them in its block.
          const spent = quota.credits === 'required' && admitted.verdict === 'allowed' ? admitted.cost : 0;
          this.ledger.record(subject, admitted, quota, requests, { spent, leased: requests === 0 });
        }
      }
      this.logger.info({ turns: lost.length, held: lost.length - missing.length }, 'unreplicated quota writes checked on redis');
      // Not sent again: a give-back is applied once by its number, and a later one of the same
      // holder may have reached this master first. Its units stay counted here, never admitted.
      const givenBack = missing.reduce((sum, turn) => sum + turn.givenBack, 0);
      if (givenBack > 0) this.logger.warn({ units: givenBack }, 'unreplicated lease give-backs lost with the old master');
      // Retried by the ledger until Redis has them, each batch once.
      if (missing.length > 0) await this.ledger.flush();
    }
  }

  close(): void {
    clearTimeout(this.retry);
    this.ledger.close();
  }
}
