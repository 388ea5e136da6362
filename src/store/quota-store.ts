import type { BanPolicy, Quota } from '../config/plans-schema.js';
import type { QuotaOutcome } from '../quota/quota-state.js';

/**
 * Counters, rejections and bans of every key: Redis shared by all replicas, or memory. Both apply
 * the rules of src/quota/quota-state.ts; a store only keeps the state.
 */
export interface QuotaStore {
  /**
   * One atomic decision for one request of `cost` units: ban check, both windows, rejection counting.
   * `batched`, when given, hears how many requests the store decided in the same call (Redis: one
   * key's requests of one event-loop turn; a trace attribute); the memory store never calls it.
   */
  consume(keyId: string, quota: Quota, ban: BanPolicy, cost?: number, batched?: (requests: number) => void): Promise<QuotaOutcome>;
  /** Current use without consuming anything. */
  usage(keyId: string): Promise<QuotaOutcome>;
  /** Lifts a ban and forgets counted rejections; false if the key was not banned. */
  unban(keyId: string): Promise<boolean>;
  /**
   * Quota leases (src/quota/quota-leases.ts): in one atomic step, gives back the unused units of an
   * ended lease, then reserves a block from both windows. Only a store shared by replicas has it.
   */
  reserve?(keyId: string, quota: Quota, ban: BanPolicy, request: LeaseRequest): Promise<LeaseGrant>;
  /**
   * Lease notices: calls `apply` with every change of a key's counts (or a ban) made while a lease
   * of it may be out, in the store's order; `gap` when some may have been missed. With `reserve`.
   */
  notices?(apply: (notice: QuotaNotice) => void, gap: () => void): void;
  /**
   * Adds what a replica admitted (and banned) on its own while the store was unreachable
   * (gateway/degraded-ledger.ts): to the windows of the batch that have not rolled yet, once per
   * (replica, batch sequence) whatever the retries. Only a store shared by replicas has it.
   */
  reconcile?(subject: string, replicaId: string, batch: DegradedAdmissions): Promise<void>;
  /** Ends what the store holds open for itself (the notices' subscription). */
  close?(): Promise<void>;
}

export interface LeaseRequest {
  /** Units wanted (0: only give back). */
  want: number;
  /** A block is at most the units left in the tighter window / divisor. */
  divisor: number;
  /** A smaller block than this is not granted. */
  minBlock: number;
  /** Unused units of an ended lease, credited only to the windows they came from. */
  giveBack: number;
  giveBackMinuteStartMs: number;
  giveBackDayStartMs: number;
  /** gcra plans: the longest the block may be used; its cells are charged as arriving then. */
  leaseMs: number;
  /** gcra plans: the TAT the given-back block left at its grant (its unused cells come off it only while it is still the TAT). */
  giveBackTatUs: number;
}

export interface LeaseGrant {
  /** Units reserved (0: none). */
  granted: number;
  /** The windows the units were taken from, and the store's clock, when it decided. */
  minuteStartMs: number;
  dayStartMs: number;
  nowMs: number;
  /** Units counted in each window after this step, every replica's leases included. */
  minuteCount: number;
  dayCount: number;
  /** gcra plans: the minute's TAT after this step, in µs (0 when it is past). */
  minuteTatUs: number;
  /** The key's notice sequence number after this step: notices with a higher one are newer. */
  seq: number;
}

/** A leased key's state after a change in the shared store (published while a lease may be out). */
export interface QuotaNotice {
  /** The key id, or `owner:<name>` (quota-subject.ts). */
  subject: string;
  /** Grows with every published change of this key: orders notices and grants. */
  seq: number;
  minuteStartMs: number;
  minuteCount: number;
  dayStartMs: number;
  dayCount: number;
  minuteTatUs: number;
  /** A ban in force until then (store clock), or 0. */
  bannedUntilMs: number;
  nowMs: number;
}

/** One subject's admissions of one replica while the shared store was away (reconcile). */
export interface DegradedAdmissions {
  /** This replica's sequence number of the batch: with its id, what makes applying it idempotent. */
  seq: number;
  minuteStartMs: number;
  minuteUnits: number;
  dayStartMs: number;
  dayUnits: number;
  /** A ban earned meanwhile (the end, on the replica's clock), or 0. */
  bannedUntilMs: number;
}
