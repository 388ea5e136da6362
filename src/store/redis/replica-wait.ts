import type { Quota } from '../../config/plans-schema.js';
import type { QuotaOutcome } from '../../quota/quota-state.js';
import type { ReplicaAcks } from './replica-acks.js';
import type { TurnCommands } from './turn-commands.js';
import type { TurnMark, TurnMarks } from './turn-marks.js';

/** gateway.yaml quota.waitForReplica: WAIT for `replicas` acknowledgements, at most `timeoutMs`. */
export interface ReplicaWait {
  replicas: number;
  timeoutMs: number;
}

/** What the quota store tells about the WAITs after its writes (gateway/unreplicated-writes.ts listens). */
export interface ReplicaWaitListener {
  /** Numbers the turns, and writes each turn's marker behind its calls (turn-marks.ts). */
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
   * The WAIT of the turn `mark` was acknowledged in full: every earlier turn of its connection is
   * on the replicas too (the replication stream is one ordered stream, and the WAIT came behind
   * the turn's marker: replica-acks.ts), the unreplicated ones included.
   */
  replicated(mark: TurnMark): void;
  /**
   * Resolves once the turns kept from connections lost since have been checked on the master
   * answering now, and what it lacked has been added to it (or that failed for now: a lost
   * connection again).
   */
  settled(): Promise<void>;
}

/**
 * Queues the turn's marker behind its calls on `commands` (before they are written): `replicated`
 * resolves true once enough replicas acknowledged every write of the turn (replica-acks.ts, on a
 * connection of its own), false when they did not in time or a write failed (a lost connection:
 * whether the writes reached anyone is unknown).
 */
export function queueWait(commands: TurnCommands, acks: ReplicaAcks, marks: TurnMarks): { mark: TurnMark; replicated: Promise<boolean> } {
  const { mark, written } = marks.queue(commands);
  return { mark, replicated: written.then((ok) => ok && acks.acknowledged(mark)) };
}
