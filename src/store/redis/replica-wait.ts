import type { ChainableCommander } from 'ioredis';
import type { Quota } from '../../config/plans-schema.js';
import type { QuotaOutcome } from '../../quota/quota-state.js';
import type { TurnMark, TurnMarks } from './turn-marks.js';

/** gateway.yaml quota.waitForReplica: WAIT for `replicas` acknowledgements, at most `timeoutMs`. */
export interface ReplicaWait {
  replicas: number;
  timeoutMs: number;
}

/** What the quota store tells about the WAITs after its writes (gateway/unreplicated-writes.ts listens). */
export interface ReplicaWaitListener {
  /** Numbers the turns, and writes each turn's marker in its pipeline (turn-marks.ts). */
  readonly marks: TurnMarks;
  /**
   * Units admitted (a decision, or a lease's grant) in the turn `mark` whose write no replica
   * acknowledged in time: the master holds them, but a failover before they are sent would lose
   * them. `requests`: the requests they are (a decision: 1; a grant: 0, its requests are counted
   * at its give-back).
   */
  unreplicated(
    subject: string,
    admitted: Pick<QuotaOutcome, 'verdict' | 'nowMs' | 'cost' | 'bannedUntilMs'>,
    quota: Quota,
    mark: TurnMark,
    requests?: number,
  ): void;
  /**
   * A lease's give-back of `units` unused units in the turn `mark` whose write no replica
   * acknowledged in time: a failover before it is sent leaves them counted on the new master
   * (counted, never admitted: an over-count, not an over-admission).
   */
  unreplicatedGiveBack(subject: string, units: number, mark: TurnMark): void;
  /**
   * The WAIT of the turn `mark` was acknowledged in full: every earlier write on its connection is
   * on the replicas too (the replication stream is one ordered stream), the unreplicated ones included.
   */
  replicated(mark: TurnMark): void;
}

/**
 * Queues the turn's marker and a WAIT at the end of `pipeline` (before its exec): `replicated`
 * resolves true when enough replicas acknowledged every write before it, false when they did not
 * in time or the WAIT failed (a lost connection: whether the writes reached anyone is unknown).
 */
export function queueWait(
  pipeline: ChainableCommander,
  wait: ReplicaWait,
  marks: TurnMarks,
): { mark: TurnMark; replicated: Promise<boolean> } {
  const mark = marks.queue(pipeline);
  const replicated = new Promise<boolean>((resolve) => {
    pipeline.call('WAIT', wait.replicas, wait.timeoutMs, (err?: Error | null, acked?: unknown) =>
      resolve(!err && Number(acked) >= wait.replicas),
    );
  });
  return { mark, replicated };
}
