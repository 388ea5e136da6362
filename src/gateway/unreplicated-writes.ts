import type { Quota } from '../config/plans-schema.js';
import type { Logger } from '../observability/log.js';
import type { Metrics } from '../observability/metrics.js';
import type { QuotaOutcome } from '../quota/quota-state.js';
import type { QuotaStore } from '../store/quota-store.js';
import type { RedisClient } from '../store/redis/connect.js';
import type { ReplicaWaitListener } from '../store/redis/replica-wait.js';
import { DegradedLedger } from './degraded-ledger.js';

/**
 * quota.waitForReplica's answer to a WAIT that timed out: the request gets what the master
 * decided (admitted or refused), it is counted in tollgate_quota_unreplicated_total, and its units
 * are kept here until their fate is known:
 * - a later WAIT on the same connection is acknowledged: the replicas have them (the replication
 *   stream is ordered), they are forgotten;
 * - the connection to the master is lost first (a failover: ioredis follows Sentinel to the new
 *   master): they may have died with the old one, and are added to whichever master answers now,
 *   once (degraded-ledger.ts). If the old master kept them after all (a lost connection, no
 *   failover), they are counted twice: an over-count of the units of the timed-out WAITs, never
 *   an admission past the limit.
 *
 * Why not refuse or shed instead: the write is in the master's memory, so the decision is as
 * exact as any other unless a failover follows before it is sent; and a WAIT times out whenever a
 * replica is slow, down or resyncing, which would make a replica's outage a gateway outage.
 */
export class UnreplicatedWrites implements ReplicaWaitListener {
  private readonly ledger: DegradedLedger;
  private pending = 0;

  constructor(
    store: QuotaStore,
    redis: RedisClient,
    logger: Logger,
    private readonly metrics: Metrics,
  ) {
    this.ledger = new DegradedLedger(store, logger, 'unreplicated quota writes added to redis');
    // Connected again (after a loss, the units of the commands cut by it are recorded by then):
    // to the new master after a failover. The flush retries until Redis has them.
    redis.on('ready', () => {
      if (this.pending === 0) return;
      this.pending = 0;
      void this.ledger.flush();
    });
  }

  unreplicated(
    subject: string,
    admitted: Pick<QuotaOutcome, 'verdict' | 'nowMs' | 'cost' | 'bannedUntilMs'>,
    quota: Quota,
    requests = 1,
  ): void {
    this.metrics.quotaUnreplicated.inc();
    this.pending++;
    this.ledger.record(subject, admitted, quota, requests);
  }

  replicated(): void {
    if (this.pending === 0) return;
    this.pending = 0;
    this.ledger.discard();
  }

  close(): void {
    this.ledger.close();
  }
}
