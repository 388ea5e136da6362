import type { Calendar } from '../config/calendar-fields.js';
import type { BanPolicy, Quota } from '../config/plans-schema.js';
import type { QuotaOutcome, Settlement } from '../quota/quota-state.js';
import type { HourUsage } from '../quota/usage-hours.js';
import type { RuleCharge, RuleState } from '../quota/limit-rules.js';

/**
 * Counters, rejections and bans of every key: Redis shared by all replicas, or memory. Both apply
 * the rules of src/quota/quota-state.ts; a store only keeps the state.
 */
export interface QuotaStore {
  /**
   * One atomic decision for one request of `cost` units: ban check, every window (minute, day, and
   * month with `perMonth`), rejection counting.
   * `batched`, when given, hears how many requests the store decided in the same call (Redis: one
   * key's requests of one event-loop turn; a trace attribute); the memory store never calls it.
   * `recall`, when given (quota leases on), lets a request that does not fit while units of the
   * key are out on leases wait for them (src/quota/quota-leases.ts, rule 11) before it is
   * decided again, finally; without it every refusal is final. Stores without leases ignore it.
   * `slot`, under a quota with `maxConcurrent`: the request also takes that concurrency slot in the
   * same step, once the windows have room (none free: `concurrent`, nothing charged). Only a store
   * with `slots` takes it; it is given back through `slots.release`.
   */
  consume(
    keyId: string,
    quota: Quota,
    ban: BanPolicy,
    cost?: number,
    batched?: (requests: number) => void,
    recall?: RecallWait,
    slot?: SlotClaim,
  ): Promise<QuotaOutcome>;
  /**
   * A request that matches limit rules (src/quota/limit-rules.ts): every rule and the plan's step
   * (as `consume`, leases' recall included) decided together, all charged or none. Redis: one script
   * call on one server; on a Cluster each rule is reserved in its own slot, then the plan decided,
   * then the reservations kept or given back.
   */
  consumeRules(
    keyId: string,
    quota: Quota,
    ban: BanPolicy,
    cost: number,
    rules: readonly RuleCharge[],
    recall?: RecallWait,
  ): Promise<RulesOutcome>;
  /**
   * A rule counter this store refused cannot admit before the refused rule's own time to fit: its
   * counters only fill (no reservation is ever given back). True on one server; false on a Redis
   * Cluster, where a reservation another request holds may be given back (redis-limit-rules.ts).
   */
  readonly rulesOnlyFill?: boolean;
  /** Concurrency slots (maxConcurrent): taken by `consume`, or alone by `slots.take`. */
  slots?: SlotStore;
  /** Current use without consuming anything; the day and month of `quota`'s calendar (UTC without one). */
  usage(keyId: string, quota?: Quota): Promise<QuotaOutcome>;
  /**
   * Changes a subject's prepaid credit balance atomically (beside its windows): adds `add` (may be
   * negative) or sets `set`; `{}` only reads. A result below zero is not applied.
   */
  changeCredits(keyId: string, change: CreditChange): Promise<CreditResult>;
  /** Lifts a ban and forgets counted rejections; false if the key was not banned. */
  unban(keyId: string): Promise<boolean>;
  /**
   * Quota leases (src/quota/quota-leases.ts): in one atomic step, gives back the unused units of an
   * ended lease, then reserves a block from both windows. Only a store shared by replicas has it.
   */
  reserve?(keyId: string, quota: Quota, ban: BanPolicy, request: LeaseRequest): Promise<LeaseGrant>;
  /**
   * A limit rule counter's lease (src/quota/rule-leases.ts), as `reserve` for a plan: gives back,
   * then reserves a block of the rule's window. Only where one script sees the rule's counter with
   * the plan's (one Redis server or Sentinel; not a Cluster).
   */
  reserveRule?(rule: RuleCharge, request: LeaseRequest): Promise<LeaseGrant>;
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
  /**
   * Settles a reservation to the cost the upstream reported (quota-state.ts `settle`), in one
   * atomic step on the subject's state, once per `id` whatever the retries. Lease holders hear of
   * the new counts as of any other change. A store without it leaves reservations as they stand.
   */
  settle?(subject: string, quota: Quota, ban: BanPolicy, settlement: Settlement & { id: string }): Promise<SettleResult>;
  /** Ends what the store holds open for itself (the notices' subscription). */
  close?(): Promise<void>;
}

/** The plan's outcome, and the rules' counters after the step (in the order asked). */
export interface RulesOutcome extends QuotaOutcome {
  rules: RuleState[];
  /** The rule that refused the request (its verdict is then `limited`, the plan charged nothing), or -1. */
  refusedBy: number;
}

/** A request answered "recalled": the step that published the recall, and how long a lease may still admit. */
export interface Recall {
  /** The recall notice's sequence number: the give-backs that answer it come with higher ones. */
  seq: number;
  /** 'le' at the recall (store clock): no lease of the key admits after it. */
  leasedUntilMs: number;
  /** The store's clock at the recall. */
  nowMs: number;
}

/** Resolves once the units a recall asked for are back, or its bound has passed (quota-leases.ts). */
export type RecallWait = (keyId: string, recall: Recall) => Promise<void>;

export interface LeaseRequest {
  /** Units wanted (0: only give back). */
  want: number;
  /** A block is at most the units left in the tighter window / divisor. */
  divisor: number;
  /** A smaller block than this is not granted. */
  minBlock: number;
  /** Unused units of an ended lease, credited only to the windows they came from. */
  giveBack: number;
  /** Requests the given-back block admitted (usage for invoicing, quota-leases.ts rule 13); absent: 0. */
  giveBackRequests?: number;
  giveBackMinuteStartMs: number;
  giveBackDayStartMs: number;
  /** Months (rule 12); absent: 0, none. */
  giveBackMonthStartMs?: number;
  /** gcra plans: the longest the block may be used; its cells are charged as arriving then. */
  leaseMs: number;
  /**
   * gcra plans: this replica's number for the block this step may grant (> 0, never reused by the
   * replica): the store keeps where each block out ends on the TAT line, as others' give-backs
   * move it, under the holder and this number. Absent or 0: none kept (its give-back credits no cells).
   */
  block?: number;
  /** gcra plans: the given-back block, by the number its ask gave it (absent or 0: none). */
  giveBackBlock?: number;
  /**
   * The first of this replica's asks of the key whose answer never came (quota-leases.ts, rule 5),
   * by the number its `block` gave it: a block the store granted that ask or a later one of this
   * replica (all unanswered) goes back as unused in this step. Absent or 0: none.
   */
  cancelFrom?: number;
  /** This replica (random per process): Redis keeps the lease holders of a key, so it knows when none is left. */
  holder: string;
  /** This step ends the replica's lease of the key: it leaves the holders, unless a newer grant made it hold again. */
  ends: boolean;
  /** With `ends`: the end (store clock) of that lease's last grant, its grant's nowMs + leaseMs. */
  heldUntilMs: number;
  /**
   * A give-back's number (growing per replica; lease-give-backs.ts): the store applies each once,
   * whatever the retries. Absent or 0: unnumbered.
   */
  giveBackNo?: number;
  /**
   * Under a quota with `credits: required` (quota-leases.ts, rule 14): the given-back block's unused
   * credits, and the credit epoch its grant replied (a balance `set` since returns them nowhere).
   */
  giveBackCredits?: number;
  giveBackCreditEpoch?: number;
  /**
   * The store's epoch of the key's counters at the given-back block's grant (`LeaseGrant.hashEpoch`):
   * counters made anew since (Redis restarted empty) are credited nothing. Absent or 0: unknown.
   */
  giveBackHashEpoch?: number;
}

export interface LeaseGrant {
  /** Units reserved (0: none). */
  granted: number;
  /**
   * The length of the window `minuteStartMs` starts (absent: a minute). A limit rule's lease
   * (rule-leases.ts) has its rule's one window there: a second, minute, hour or day.
   */
  windowMs?: number;
  /** The windows the units were taken from, and the store's clock, when it decided. */
  minuteStartMs: number;
  dayStartMs: number;
  nowMs: number;
  /** Units counted in each window after this step, every replica's leases included. */
  minuteCount: number;
  dayCount: number;
  /** The month window (calendar.ts) and its count (0 under a quota without perMonth; absent: 0). */
  monthStartMs?: number;
  monthCount?: number;
  /** gcra plans: the minute's TAT after this step, in µs (0 when it is past). */
  minuteTatUs: number;
  /** The key's notice sequence number after this step: notices with a higher one are newer. */
  seq: number;
  /** The credit balance in the store after this step, blocks out on leases not in it (absent: 0). */
  creditBalance?: number;
  /** The balance's epoch (a `set` moves it on): a block's give-back carries its grant's. */
  creditEpoch?: number;
  /** The epoch of the key's counters (new when they are made anew): a block's give-back carries its grant's. */
  hashEpoch?: number;
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
  monthStartMs?: number;
  monthCount?: number;
  minuteTatUs: number;
  /** A ban in force until then (store clock), or 0. */
  bannedUntilMs: number;
  nowMs: number;
  /**
   * How long a lease of the key may still admit after this change ('le', store clock); undefined
   * from a replica that does not send it. At or before `nowMs`: no lease of the key is out.
   */
  leasedUntilMs?: number;
  /** A request did not fit while leases were out: their holders give their unused units back now. */
  recall?: boolean;
  /** The credit balance in the store, blocks out on leases not in it; undefined from a version without it. */
  creditBalance?: number;
}

/** One subject's admissions of one replica while the shared store was away (reconcile). */
export interface DegradedAdmissions {
  /** This replica's sequence number of the batch: with its id, what makes applying it idempotent. */
  seq: number;
  minuteStartMs: number;
  minuteUnits: number;
  dayStartMs: number;
  dayUnits: number;
  /** The month the month units were admitted in (absent, with them: none counted, the quota has no month). */
  monthStartMs?: number;
  monthUnits?: number;
  /** The zone and anchor the batch's day and month follow (calendar.ts); absent: UTC days, calendar months. */
  calendar?: Calendar;
  /** A ban earned meanwhile (the end, on the replica's clock), or 0. */
  bannedUntilMs: number;
  /**
   * Prepaid credits spent (only by unreplicated writes re-added: degraded mode spends none), taken
   * from the balance; `leasedCredits` of them are held by leases' blocks (absent: none).
   */
  credits?: number;
  leasedCredits?: number;
  /**
   * Of the units, those leases' blocks hold (only unreplicated lease grants re-added), per window:
   * added to the units out on leases too, so the blocks' give-backs can return their unused ones
   * (absent: none).
   */
  leasedUnits?: { minute: number; day: number; month: number };
  /**
   * gcra plans, unreplicated writes re-added only: the cells they charged, in µs of the TAT, to
   * charge again (on top of the TAT from the last one's admission, never past now + the tolerance
   * τ; nothing once their slots have passed). Degraded-mode admissions
   * carry none: they are bounded by the local share instead. Absent: none.
   */
  gcra?: {
    tatUs: number;
    toleranceUs: number;
    /** When the last of them was admitted (µs, the replica's clock): they are charged from there at the earliest. */
    lastUs: number;
  };
  /** Usage for invoicing: what the batch admitted and refused, per hour (absent: none). */
  usage?: HourUsage[];
}

/** An operator's change of a credit balance: one of `add` or `set`; neither reads it. */
export interface CreditChange {
  add?: number;
  set?: number;
}

/** The balance before and after; `applied` false when the change would have taken it below zero. */
export interface CreditResult {
  before: number;
  after: number;
  applied: boolean;
}

/** What a settlement did: `applied` false when the same id was settled before (nothing changed). */
export interface SettleResult {
  applied: boolean;
  /** Units of the extra that the credit balance could not hold (never taken below zero). */
  shortfall: number;
  /** The balance after the step. */
  creditBalance: number;
}

/** A concurrency slot a request asks for (gateway/concurrency-slots.ts names it and keeps it alive). */
export interface SlotClaim {
  /** Unique while held: `<replicaId>:<n>`. */
  member: string;
  /** Slots the subject may hold at once, every replica's together. */
  max: number;
  /** How long the slot lives unless renewed (store clock): a dead replica's slots end after it. */
  lifeMs: number;
}

/**
 * A subject's concurrency slots (Redis: the sorted set `tg:slots:{subject}`, member → end of its
 * life on Redis's clock; memory: the same per process). Slots past their life are not counted.
 */
export interface SlotStore {
  /** Takes a slot for `subject` alone (no quota step): false when `max` are held already. */
  take(subject: string, claim: SlotClaim): Promise<boolean>;
  /** Gives slots back (a member no longer held is ignored). */
  release(subject: string, members: readonly string[]): Promise<void>;
  /** Extends the life of every slot listed (subject → members) to `lifeMs` from now: one batched call. */
  renew(held: ReadonlyMap<string, readonly string[]>, lifeMs: number): Promise<void>;
  /** Slots held now for `subject` (every replica's). */
  count(subject: string): Promise<number>;
}
