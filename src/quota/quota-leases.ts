import { randomBytes } from 'node:crypto';
import type { BanPolicy, Quota } from '../config/plans-schema.js';
import type { LeaseGrant, QuotaNotice, QuotaStore, Recall } from '../store/quota-store.js';
import { periodsAt, pick } from './calendar.js';
import { gcraMinute, type GcraWindow } from './gcra.js';
import { LeaseGiveBacks } from './lease-give-backs.js';
import type { QuotaOutcome } from './quota-state.js';
import { MINUTE_MS } from './windows.js';

/**
 * Quota leases: a hot key far from its limits is admitted without a Redis round trip, and no
 * window ever admits more than its limit. The rule (docs/quota-leases.md has the bounds):
 *
 * 1. A replica reserves a block of units for one key (or owner) in one atomic script step
 *    (LEASE_SCRIPT), consuming them from the minute AND the day windows together, exactly as that
 *    many admitted requests would. It then admits requests of that key against the block in
 *    memory, a request of cost c taking c units; what the block cannot cover goes to Redis.
 * 2. Only for keys that show a rate on this replica (≥ `hotPerSecond` units in a second); a cold
 *    key takes today's path and costs one map update.
 * 3. Block size: the units this replica's rate uses in `leaseMs` (between `minBlock` and
 *    `maxBlock`), and never more than the units left in the tighter window / (`spread` ×
 *    replicas). Below `minBlock` no lease is granted: near the limit every request goes to Redis as
 *    before, so admission at the edge, Retry-After and bans are today's, exactly.
 * 4. A lease never crosses a window boundary: it admits only while this replica's monotonic clock
 *    is safely before the end of the minute in which Redis granted it (Redis's time at the grant,
 *    counted from when the request was *sent*, less a margin), and at most `leaseMs` after its last
 *    grant. Every unit is thus admitted inside the window that counted it.
 * 5. It is renewed in the background once half its last block is used; a renewal granted in a new
 *    minute replaces it. Units not used are given back when it ends (expiry, window end, the key's
 *    plan or record changed, shutdown): credited only to the windows they were taken from — a
 *    window that rolled over since is not credited, its counters being the new window's.
 *    A replica's asks of a key go one at a time. An ask whose answer never came (a connection
 *    cut, a timeout: the block, if Redis granted it, is never used here) is named by the key's
 *    next ask, and Redis gives that block back in the same step (LEASE_SCRIPT's cancelFrom). A
 *    key that asks no more within CANCEL_AFTER_MS has it named alone, by a step that asks for
 *    nothing (`cancelLost`), counted as an ask: none other of the key goes out beside it, and
 *    under the key's quota as last seen (none once the key changed, until it is seen again).
 * 6. Headers: remaining = Redis's remaining as last heard (every lease counted as used) plus this
 *    lease's unused units. Units out on leases are counted but not yet admitted, so it never
 *    exceeds what is truly left once every notice (rule 10) has arrived; it under-reports by the
 *    units out on other replicas' leases. A store-decided answer on a replica holding a lease adds
 *    back the same units, those of blocks granted before the decision (`told`).
 *
 * gcra plans (gcra.ts: interval T, tolerance τ = burst × T) lease cells, not window units. GCRA's
 * promise rests on one fact: every admitted cell owns a slot S of the TAT line (slots T apart,
 * disjoint), and a cell admitted at u has u ≤ S ≤ u + τ − T. The cells admitted in any span
 * [x, x + D) then own slots in [x, x + D + τ − T), so there are at most burst − 1 + ⌈D / T⌉ of
 * them: at most `limit` in any 60 s (T = ⌈60 s / (limit − burst + 1)⌉). A lease keeps that fact:
 *
 * 7. Redis grants n cells at its time g as if they arrived at g + leaseMs, the latest moment the
 *    lease may use them: TAT' = max(TAT, g + leaseMs) + n × T, so every slot S ≥ g + leaseMs > u.
 *    It grants them only if the last would conform at g, the earliest moment they may be used:
 *    TAT' − g ≤ τ (gcra.ts admitUs with now = g), so S ≤ g + τ − T ≤ u + τ − T. n is at most
 *    what that allows and what the UTC day has left, / (`spread` × replicas), and at least
 *    `minBlock`. A cell that may be used anywhere in [g, g + leaseMs) needs a slot in
 *    [g + leaseMs, g + τ − T]: exactness is impossible unless τ − T ≥ leaseMs, and a block needs
 *    τ ≥ leaseMs + minBlock × spread × replicas × T. A plan short of that (the default burst of 1,
 *    for one) takes no lease and asks for none.
 * 8. Each grant is its own block, used oldest first, and admits only while this replica's clock is
 *    before its sending time + leaseMs, less the margin for the two clocks' rates (so u < g +
 *    leaseMs on Redis's clock), and before the end of the UTC day that counted it. A renewal adds
 *    a block; it never extends an older one's life.
 * 9. Give-back of m unused cells of a block: its used cells own its first slots, so only its top
 *    m slots, [E − m × T, E) below the block's end E, are free. Redis takes m × T off the TAT
 *    while the TAT is still E (nothing charged above them), or while E − m × T ≥ now + leaseMs
 *    and ≥ 'le' (every lease out ends by then, whatever its replica's leaseMs):
 *    every cell charged above them (at u ≤ now, or a block granted at g ≤ now and used before
 *    g + leaseMs) then moves down onto a slot still ≥ now + leaseMs, after its use, and its slot
 *    only falls, so u ≤ S ≤ u + τ − T holds. Another holder's block below it, given back first
 *    (a recall ends them all at once), moves E down: Redis keeps each block's E as it moves (a
 *    block granted later lies above: a grant starts at the TAT) under the holder and a number
 *    the replica gives each ask, never reused, and the give-back names its block. A block Redis
 *    does not know (a master that lacks its grant) takes nothing off the TAT. Otherwise the TAT
 *    stays (those cells are lost, until real time passes them); the day is credited as for
 *    fixed windows. A settled reservation's refund (SETTLE_SCRIPT) takes nothing off the TAT
 *    while a block is out: it would move the blocks above it down below their use. A lease that
 *    ends gives its blocks back newest first, so a replica's own blocks can come back one after
 *    the other. After a refused block a gcra key, having no
 *    minute edge, asks again once a full bucket would have drained (τ, at most a minute).
 *
 * 10. Notices. Redis records how long a lease of the key may still admit ('le': grant time +
 *    leaseMs; every block here stops before that, rules 4 and 8). Until then every change of the
 *    key's counts (a grant, a give-back, a request Redis admitted) and a ban is published with a
 *    sequence number that grows with each, even past a state lost in Redis (quota-script.ts). A
 *    replica applies to its lease the notices newer than what it last heard (its grant's or a
 *    notice's number), so its headers see what the other replicas took since its grant within a
 *    message's time, not leaseMs; a ban ends its lease at once. A lost subscription may have lost
 *    notices: every lease ends then. Cold keys, and keys no replica holds a lease of, publish
 *    nothing. Redis keeps the replicas holding a lease of the key, each with its last grant's
 *    end; a lease that ends early (give-back, recall, key change, shutdown) leaves them, and 'le'
 *    falls to the latest end of those left: 0 once none is.
 *
 * 11. Recall: exact at the limit for any burst. A request Redis cannot fit while units of a lease
 *    of its key may be out (a lease may still admit, 'le' > now, or one lapsed less than
 *    RECALL_GRACE_MS ago has not given back yet) is not refused yet: Redis counts it towards no
 *    ban, records the want (no block is granted until 'le', or for the grace) and publishes a
 *    recall. Every replica holding a lease of the key ends it at once, giving its unused units
 *    back (rule 5); a lapsed one's sweep gives them back within a tenth of leaseMs. The request
 *    waits until a notice newer than the recall says no lease's units are left out ('le' 0, or
 *    more than the grace ago), or at most until the recall's 'le' (or now, if later) +
 *    RECALL_GRACE_MS (a holder killed or deaf to notices), and is then decided
 *    again, finally: a refusal then is counted once, as without leases. A refused request
 *    therefore lacked units that no lease held (or that a lost holder took with it), so a burst
 *    is admitted to exactly the limit. A request on a replica whose own ask for a block is in
 *    flight waits for that answer (a round trip, as Redis would be) instead of asking Redis beside
 *    it for the very units the block may take.
 *
 * 12. Months (a quota with `perMonth`): a block is taken from the month too (no more than the
 *    month has left / (`spread` × replicas)), given back to it only while it is the same month,
 *    and, as a month begins where a day of the quota's calendar does, a lease that stops before
 *    its day's end (rules 4 and 8) never crosses a month edge either.
 *
 * 13. Usage for invoicing (docs/operations.md): Redis counts a block's units in its grant's hour
 *    when it grants it. Each block counts the requests it admits (a request taking from two blocks
 *    counts in the first); its give-back carries them, with its unused units, which Redis takes
 *    off that hour again. A block used up sends a give-back of nothing but its requests when it
 *    ends (one command per block, in the background). A replica killed with blocks out loses
 *    their request counts only: their units stay charged, as they stay counted in the windows.
 *
 * 14. Credits (a quota with `credits: required`): a block is also that many credits, taken from the
 *    balance in the grant's step (no more than the balance / (`spread` × replicas)), so a request
 *    admitted from it has spent its cost, once, and the balance never goes below zero. Its unused
 *    credits go back with its units (the give-back's number applies them once), to the balance
 *    whatever the windows did, but only as many as blocks still hold in Redis, and only while the
 *    balance is of the grant's epoch: an operator's `set` makes the blocks out spent (their holders
 *    are recalled). A request the balance cannot cover while a lease may be out is recalled as a
 *    window's refusal is (rule 11), then decided again: 402 only if it still cannot. Headers: the
 *    balance as last heard (grant or notice; blocks out not in it) plus this lease's unused units:
 *    never more than the balance and every block's unused credits together.
 *
 * 15. Warm keys (`warmKeys`): a key below `hotPerSecond` that calls steadily (10,000 customers each
 *    calling now and then) would cost a grant and a give-back per leaseMs for a few requests, more
 *    than the decisions they replace. Under a fixed-window plan it instead takes a lease living
 *    until its minute's end: once this replica has seen it for 5 s at least and 8 units in its
 *    last 5 to 10 s, at its rate over them, a block of that rate times the minute's time left (by
 *    this replica's wall clock, at least 5 s and 2 × leaseMs; between minBlock and maxBlock and ≤
 *    left / (spread × replicas), rule 3), if that is WARM_MIN_BLOCK at least (renewal: minBlock). So that
 *    thousands of keys do not all give back at the minute's end and ask again at its start, each
 *    key's warm leases start up to 3 s into the minute and end up to 3 s before its end
 *    (WARM_EDGE_SPREAD_MS; its requests meanwhile are Redis's, as a cold key's). Redis's 'le' is
 *    then the grant's time plus that life (rule 10), rule 4 keeps it inside its minute, and a
 *    renewal asks for the minute's rest again: a grant, a give-back and a renewal or two a minute
 *    per key and replica, whatever its rate. Everything else is a hot lease's. One bound is not:
 *    a recalled request (rule 11) waits for a holder that cannot answer (killed, or its
 *    subscription cut) at most leaseMs + RECALL_GRACE_MS, not until the minute's end; units such
 *    a holder keeps miss the burst, as after the bound of a hot one. Once a recall went unheard,
 *    later ones of the key with the same 'le' (no grant can come before it) wait no more; not one
 *    with another 'le' (a lower one: the key's state was lost since, and a lease granted after
 *    it), nor after a lost subscription. A renewal's ask makes Redis's end of this holder its
 *    grant's time + the renewal's life, answered or not: from the ask on, the lease's blocks stop
 *    by then. gcra plans and limit rules' counters take no warm lease: gcra's slots bound a
 *    lease's life to τ − T (rule 7), a rule's window may be a day.
 */
export interface LeaseSettings {
  leaseMs: number;
  hotPerSecond: number;
  minBlock: number;
  maxBlock: number;
  spread: number;
  /** Replicas sharing the Redis (gateway.yaml quota.replicas). */
  replicas: number;
  /** Warm keys (below hotPerSecond) take leases that live until their minute's end (rule 15); off when absent. */
  warmKeys?: boolean;
}

/** A request that may wait for an ask's answer, and may stop waiting before it (gateway/redis-wait.ts). */
export interface LeaseWaiter {
  redisWaitOver?: boolean;
}

/** Units reserved by one grant; a gcra lease holds one per grant, each with its own end. */
interface Block {
  left: number;
  /** Requests admitted from it, not yet told to Redis (rule 13). */
  requests: number;
  /** This replica's clock: the block admits only before it. */
  expiresAtMs: number;
  /** The windows (store clock) its units were taken from. */
  minuteStartMs: number;
  dayStartMs: number;
  monthStartMs: number;
  /** gcra: this replica's number for it, which Redis keeps its end E under (rule 9); 0 for fixed windows. */
  no: number;
  /** Its grant's notice sequence number: a store decision with a higher one counted its units. */
  grantSeq: number;
  /** Credits (rule 14): the balance's epoch at its grant, which its give-back carries. */
  creditEpoch: number;
  /** The store's epoch of the key's counters at its grant: its give-back credits no counters made anew since. */
  hashEpoch: number;
}

interface Lease {
  quota: Quota;
  ban: BanPolicy;
  /** The windows (store clock) of the last grant. */
  minuteStartMs: number;
  dayStartMs: number;
  /** Oldest first. Fixed windows: one (a renewal adds to it); gcra: one per grant (rule 8). */
  blocks: Block[];
  /** The last block granted: renewal starts when half of it is used. */
  lastBlock: number;
  /**
   * The store's counts and gcra TAT as last heard (the last grant, or a newer notice), with their
   * sequence number; the store's clock at the last grant, and this replica's when it was asked.
   */
  seq: number;
  /** The newest notice from a later window than this lease's: for the lease a renewal there makes. */
  later?: QuotaNotice;
  minuteCount: number;
  dayCount: number;
  monthCount: number;
  tatUs: number;
  /** The store's credit balance as last heard, blocks out not in it (rule 14). */
  creditBalance: number;
  storeNowMs: number;
  askedAtMs: number;
  /** The renewal on its way: requests the lease cannot cover wait for it (rule 11). */
  renewal?: Promise<unknown>;
  /** How long its last grant may admit (Redis's 'le' is that grant's time plus this): leaseMs, or a warm lease's life (rule 15). */
  lifeMs: number;
  /** The end of its last grant on the store's clock: what Redis keeps for this holder (rule 10). */
  heldUntilMs: number;
}

interface Rate {
  second: number;
  units: number;
  previous: number;
  /** After a refused reservation (near the limit): no new ask before this. */
  quietUntilMs: number;
  /** Rule 15: when this replica first saw the key, and its units in the WARM_SPAN_MS span numbered `span` and the one before. */
  firstMs: number;
  /** Rule 15: where in WARM_EDGE_SPREAD_MS its warm leases start and end, 0 to 1. */
  edge: number;
  span: number;
  spanUnits: number;
  previousSpanUnits: number;
}

/**
 * How long an unanswered ask is named by the key's next asks (rule 5). Redis keeps a grant's
 * record as long as the key's lease holders (a minute past the last grant of any replica); a name
 * forgotten sooner only leaves that block counted, never admitted.
 */
const LOST_ASK_MS = 2 * MINUTE_MS;

/**
 * An unanswered ask not named by the key's next ask within this long is named alone (rule 5,
 * `cancelLost`), and tried again as often while Redis does not answer: a warm key's block is a
 * minute's worth of its units, which a key that stopped calling would leave counted, and shown as
 * used, until its windows end. A hot key asks again sooner and names it itself.
 */
export const CANCEL_AFTER_MS = 1000;

/**
 * A recalled request waits at most until the recall's 'le' plus this (rule 11): a holder that
 * cannot answer (killed, or its subscription cut) has stopped admitting by then; units it gives
 * back after that miss that burst, not the window. It is the time a live holder has to hear the
 * recall, give back and be heard when its lease was about to lapse anyway ('le' a few ms away):
 * on a loaded machine that took more than 50 ms, and the burst was under-admitted (150 of 180).
 * Redis also keeps a lapsed lease's holder this long past its end, until its give-back (its
 * sweep, a tenth of leaseMs, then a round trip): a refusal meanwhile lacks units on their way,
 * and is a recall too (quota-script.ts CLOCK's unitsOut); a loaded machine's give-back came
 * 30 units too late for a burst, and a rule's refusal, remembered, refused the rest of it. Only
 * requests past the limit while a lease's units are out ever wait it.
 */
export const RECALL_GRACE_MS = 500;

/**
 * Rule 15: a warm key's rate is its units over the current span and the one before (so over 5 to
 * 10 s), once this replica has seen it for WARM_HISTORY_MS at least and WARM_MIN_UNITS units in
 * them (steady, not a few requests in a row); its lease lives until the minute's end, and none is
 * asked with less than WARM_MIN_LIFE_MS of the minute left (two commands, grant and give-back, for
 * a few seconds of a slow key's requests are not worth it).
 */
const WARM_SPAN_MS = 5000;
const WARM_HISTORY_MS = 5000;
const WARM_MIN_UNITS = 8;
const WARM_MIN_LIFE_MS = 5000;
/**
 * Warm leases of many keys would all end at the minute's end and be asked for again at its start:
 * thousands of give-backs and grants in one moment, every decision queued behind them in Redis.
 * Each key's lease starts `spread` × this into its minute and ends (1 − `spread`) × this before its
 * end instead (`spread` its own, drawn once): the steps are spread over these seconds, and its
 * requests between are decided by Redis as a cold key's.
 */
const WARM_EDGE_SPREAD_MS = 3000;
/**
 * The smallest first block of a warm lease (minBlock if larger). A grant and a give-back are two
 * script calls of their own, each several times a batched decision's Redis CPU, and two round
 * trips: a key whose rate fills fewer units before its minute ends is decided by Redis, batched
 * (measured: 10,000 keys at 0.23 a second each, leased, cost twice the Redis commands and a third
 * more Redis CPU per request than their decisions). A renewal needs minBlock only.
 */
const WARM_MIN_BLOCK = 32;

/** Margin before the window's end on this clock: covers clock rate drift over a minute (0.1 %) and more. */
const EDGE_MARGIN_MS = 10;
const EDGE_DRIFT = 0.001;

type ReservingStore = Required<Pick<QuotaStore, 'reserve'>> & Pick<QuotaStore, 'notices'>;

/** A lost ask of a key named alone (rule 5, `cancelLost`): on its way, and under which limits (none known since the key changed). */
interface Cancel {
  sending: boolean;
  quota: Quota | undefined;
  ban: BanPolicy;
  /** The next try. */
  timer?: NodeJS.Timeout;
  /** Sends it now, once (shutdown). */
  final?: () => void;
}

/** A reservation on its way: `cancelled` when the key changed meanwhile; the newest notice heard meanwhile. */
interface Asking {
  cancelled: boolean;
  heard?: QuotaNotice;
  /** Settles once the answer has been applied: requests of the key wait for it (rule 11). */
  answered: Promise<unknown>;
}

/** A request waiting for a recall's units (rule 11). */
interface RecallWaiter {
  seq: number;
  /** Ends the wait: heard (a notice says the units are back, the default) or not (the bound). */
  done: (heard?: boolean) => void;
  /** Ends it unheard within `ms` at the latest (sooner than its bound: a notice told a nearer one). */
  within: (ms: number) => void;
}

export class QuotaLeases {
  private readonly leases = new Map<string, Lease>();
  private readonly rates = new Map<string, Rate>();
  /** Reservations on their way, per subject. */
  private readonly asking = new Map<string, Asking>();
  /** Per quota object: its gcra minute, or null for fixed windows; undefined when it can take no lease (rule 7). */
  private readonly kinds = new WeakMap<Quota, GcraWindow | null | undefined>();
  private readonly timer: NodeJS.Timeout;
  /** Reservations and give-backs on their way: shutdown waits for them, so that no block outlives it. */
  private readonly inFlight = new Set<Promise<unknown>>();
  /** Requests waiting for recalled units, per subject (rule 11). */
  private readonly recalls = new Map<string, RecallWaiter[]>();
  /**
   * Per subject: the 'le' of a recall its bound ended unheard (a holder killed or deaf), and until
   * when (this replica's clock) units of it may be out. A warm lease's holder (rule 15) keeps 'le'
   * up to its minute's end: every refusal of the key until then is a recall, which waits no more.
   */
  private readonly silent = new Map<string, { leasedUntilMs: number; untilMs: number }>();
  /** This replica among a key's lease holders in Redis. */
  private readonly holder = randomBytes(6).toString('hex');
  /** The asks made so far: each names the block it may get by its number (rule 9). */
  private asks = 0;
  /** Per subject: a renewal on its way (asks of a key go one at a time, rule 5). */
  private readonly renewing = new Set<string>();
  /**
   * Per subject: the first of its asks whose answer never came, and when (rule 5): the next ask
   * names it, and Redis gives back what it granted. Forgotten once an ask is answered (that ask's
   * step did), or after LOST_ASK_MS.
   */
  private readonly lost = new Map<string, { from: number; atMs: number }>();
  /**
   * Per subject: its lost ask named alone soon, or that step on its way (`sending`: an ask, rule 5,
   * so no other ask of the key goes out until it is answered), under the key's quota as last seen
   * (none since the key changed, until it is seen again: `cancelLost`).
   */
  private readonly cancels = new Map<string, Cancel>();
  /** Subjects whose ask or renewal on its way was sent before a change of the key (`forget`): its quota may be the key's no more. */
  private readonly changedInFlight = new Set<string>();
  private closed = false;
  /** The second in which sweep() last forgot quiet keys' rates. */
  private ratesSweptIn = 0;
  /** Give-backs, in order per key, retried after a failure, applied once. */
  readonly giveBacks: LeaseGiveBacks;

  constructor(
    private readonly store: ReservingStore,
    private readonly settings: LeaseSettings,
    /** A monotonic clock in ms (performance.now); injected by tests. */
    private readonly now: () => number = () => performance.now(),
    /** The wall clock (Date.now): where in its minute a warm key's lease is asked (rule 15); injected by tests. */
    private readonly wallNow: () => number = Date.now,
  ) {
    // Often: a lapsed lease's units are given back within a tenth of leaseMs of its end, well
    // within the grace Redis gives them (RECALL_GRACE_MS), so a refusal meanwhile waits for them.
    this.timer = setInterval(() => this.sweep(), Math.max(10, Math.min(settings.leaseMs, 1000) / 10));
    this.timer.unref();
    this.giveBacks = new LeaseGiveBacks((subject, quota, ban, request) => store.reserve(subject, quota, ban, request));
    // Missed notices could leave a lease's headers behind the others' use: every lease ends (rule 10).
    store.notices?.(
      (notice) => this.onNotice(notice),
      () => this.forget(null),
    );
  }

  /** The limits this replica's lease of `subject` was granted under, if it holds one. */
  quotaOf(subject: string): Quota | undefined {
    return this.leases.get(subject)?.quota;
  }

  /** Units of this key leased here now (tests, metrics). */
  held(subject: string): number {
    const lease = this.leases.get(subject);
    return lease ? unused(lease) : 0;
  }

  /**
   * A store decision of `subject` admitted while this replica holds a lease of it, as its headers
   * tell it (rule 6): the store counted this lease's unused units as used, so they are added back to
   * what remains, as on a leased answer. Only the blocks granted before the decision (a lower
   * sequence number: it counted them) and still in force (so in the decision's windows, rule 4):
   * never more than is truly left; less by the units out on other replicas' leases.
   */
  told(subject: string, outcome: QuotaOutcome): QuotaOutcome {
    const lease = this.leases.get(subject);
    if (!lease || outcome.seq === undefined || outcome.verdict !== 'allowed') return outcome;
    const nowMs = this.now();
    let left = 0;
    for (const block of lease.blocks) if (block.grantSeq < outcome.seq && nowMs < block.expiresAtMs) left += block.left;
    if (left === 0) return outcome;
    const gcra = this.kindOf(lease.quota);
    return {
      ...outcome,
      minuteCount: outcome.minuteCount - left,
      dayCount: outcome.dayCount - left,
      monthCount: lease.quota.perMonth === undefined ? outcome.monthCount : (outcome.monthCount ?? 0) - left,
      minuteTatUs: gcra ? outcome.minuteTatUs - left * gcra.intervalUs : outcome.minuteTatUs,
      creditBalance: lease.quota.credits === 'required' ? (outcome.creditBalance ?? 0) + left : outcome.creditBalance,
    };
  }

  /** The sequence number of what this replica's lease of `subject` last heard (rule 10; tests). */
  lastHeard(subject: string): number | undefined {
    return this.leases.get(subject)?.seq;
  }

  /**
   * The outcome of a request admitted against this replica's lease of `subject`, or undefined:
   * then the store decides, exactly as without leases. Also counts the key's rate and, for a hot
   * key, asks for a lease in the background.
   */
  admit(
    subject: string,
    quota: Quota,
    ban: BanPolicy,
    cost: number,
    waiter?: LeaseWaiter,
  ): QuotaOutcome | Promise<QuotaOutcome | undefined> | undefined {
    if (this.cancels.size > 0) this.seen(subject, quota, ban);
    const gcra = this.kindOf(quota);
    if (gcra === undefined || this.closed) return undefined;
    const nowMs = this.now();
    const rate = this.count(subject, cost, nowMs);
    const lease = this.current(subject, quota, ban, nowMs);
    if (lease) {
      if (unused(lease) >= cost) {
        take(lease, cost);
        if (!lease.renewal && unused(lease) * 2 < lease.lastBlock) this.renew(subject, lease, rate, nowMs);
        return outcomeOf(lease, gcra, nowMs, cost);
      }
      // A request costing more than any block may hold (maxBlock) is Redis's anyway: asking for
      // blocks for it would cost a command each and hold units back from it.
      if (cost > this.settings.maxBlock) return undefined;
      if (!lease.renewal) this.renew(subject, lease, rate, nowMs);
      return lease.renewal && this.afterAsk(lease.renewal, subject, quota, ban, cost, waiter);
    }
    const ask = this.asking.get(subject);
    if (ask && cost <= this.settings.maxBlock) return this.afterAsk(ask.answered, subject, quota, ban, cost, waiter);
    if (this.renewing.has(subject)) return undefined;
    if (this.hot(rate, cost, nowMs)) this.open(subject, quota, ban, this.hotAsk(rate), nowMs);
    else if (gcra === null) {
      const warm = this.warm(rate, cost, nowMs, Math.max(this.settings.minBlock, WARM_MIN_BLOCK));
      if (warm) this.open(subject, quota, ban, warm, nowMs);
    }
    return undefined;
  }

  /**
   * As `admit`, for a request several leases must cover together, all or none (a plan's and its
   * limit rules': rule-leases.ts): never waits. It counts the rate and asks for blocks as `admit`
   * does, and tells whether this replica's lease of `subject` covers `cost` now; `take` then takes
   * the units, in the same turn as the others' (nothing can take them meanwhile).
   */
  covers(subject: string, quota: Quota, ban: BanPolicy, cost: number): boolean {
    if (this.cancels.size > 0) this.seen(subject, quota, ban);
    if (this.kindOf(quota) === undefined || this.closed) return false;
    const nowMs = this.now();
    const rate = this.count(subject, cost, nowMs);
    const lease = this.current(subject, quota, ban, nowMs);
    if (!lease) {
      if (!this.asking.has(subject) && !this.renewing.has(subject) && this.hot(rate, cost, nowMs))
        this.open(subject, quota, ban, this.hotAsk(rate), nowMs);
      return false;
    }
    if (unused(lease) >= cost) return true;
    if (!lease.renewal && cost <= this.settings.maxBlock) this.renew(subject, lease, rate, nowMs);
    return false;
  }

  /** Takes `cost` from the lease `covers` found covering it in this turn: the request's outcome. */
  take(subject: string, cost: number): QuotaOutcome {
    const nowMs = this.now();
    const lease = this.taken(subject, cost, nowMs);
    return outcomeOf(lease, this.kindOf(lease.quota)!, nowMs, cost);
  }

  /** As `take`, answering only the window's count after it (a rule counter's lease: its headers need no more). */
  takeCount(subject: string, cost: number): number {
    const lease = this.taken(subject, cost, this.now());
    return lease.minuteCount - unused(lease);
  }

  /** Takes `cost` from `subject`'s lease, asking for more once half of the last block is used. */
  private taken(subject: string, cost: number, nowMs: number): Lease {
    const lease = this.leases.get(subject)!;
    take(lease, cost);
    if (!lease.renewal && unused(lease) * 2 < lease.lastBlock) this.renew(subject, lease, this.rates.get(subject)!, nowMs);
    return lease;
  }

  /** A key without a lease here asks for one: hot enough, a block may hold its cost, and not refused one lately. */
  private hot(rate: Rate, cost: number, nowMs: number): boolean {
    return cost <= this.settings.maxBlock && perSecond(rate) >= this.settings.hotPerSecond && nowMs >= rate.quietUntilMs;
  }

  /**
   * Rule 15: a key below hotPerSecond that this replica has seen long enough, whose rate fills a
   * block of at least `least` units before its minute ends (by this replica's wall clock): a lease
   * until then, sized for that rate. A key this replica has not seen for a while starts again.
   */
  private warm(rate: Rate, cost: number, nowMs: number, least: number): LeaseAsk | undefined {
    if (!this.settings.warmKeys || cost > this.settings.maxBlock || nowMs < rate.quietUntilMs) return undefined;
    const perMs = warmPerMs(rate, nowMs);
    if (perMs === 0) return undefined;
    const intoMs = this.wallNow() % MINUTE_MS;
    if (intoMs < rate.edge * WARM_EDGE_SPREAD_MS) return undefined;
    const lifeMs = Math.floor(MINUTE_MS - intoMs - (1 - rate.edge) * WARM_EDGE_SPREAD_MS);
    if (lifeMs < Math.max(WARM_MIN_LIFE_MS, 2 * this.settings.leaseMs)) return undefined;
    const want = Math.min(this.settings.maxBlock, Math.floor(perMs * lifeMs));
    return want >= least ? { want, lifeMs } : undefined;
  }

  /** A hot key's ask: a block for its rate over leaseMs (rule 3). */
  private hotAsk(rate: Rate): LeaseAsk {
    return { want: this.wanted(rate), lifeMs: this.settings.leaseMs };
  }

  /**
   * A renewal's ask: a hot key's, or a warm lease's again while the key is not hot (rule 15), a
   * block of minBlock at least; none for a warm lease its minute has no room for any more (its
   * requests go to Redis once it is used up).
   */
  private renewalAsk(lease: Lease, rate: Rate, nowMs: number): LeaseAsk | undefined {
    // A warm lease's life is longer than leaseMs (warm() asks for none shorter than 2 × leaseMs).
    if (lease.lifeMs <= this.settings.leaseMs || perSecond(rate) >= this.settings.hotPerSecond) return this.hotAsk(rate);
    return this.warm(rate, 1, nowMs, this.settings.minBlock);
  }

  /** This replica's lease of `subject` in force for these limits, if any (an outdated one ends). */
  private current(subject: string, quota: Quota, ban: BanPolicy, nowMs: number): Lease | undefined {
    const lease = this.leases.get(subject);
    if (!lease) return undefined;
    if (lease.quota !== quota || lease.ban !== ban) {
      void this.end(subject, lease);
      return undefined;
    }
    return this.expire(subject, lease, nowMs) ? undefined : lease;
  }

  /**
   * Rule 11: a request this replica's own ask may cover waits for its answer, then takes from the
   * lease it brought, or goes to Redis (undefined) as it would have. An ask that failed fails the
   * requests that waited for it with its error: they have waited one command timeout already,
   * and are decided as a failed store call's (enforce-quota.ts), not sent to Redis for another.
   */
  private async afterAsk(
    answered: Promise<unknown>,
    subject: string,
    quota: Quota,
    ban: BanPolicy,
    cost: number,
    waiter?: LeaseWaiter,
  ): Promise<QuotaOutcome | undefined> {
    const answer = await answered;
    if (answer instanceof AskFailed) throw answer.err;
    // The request stopped waiting (its time on Redis ran out): its answer was given, nothing is taken for it.
    if (waiter?.redisWaitOver) return undefined;
    const gcra = this.kindOf(quota);
    const nowMs = this.now();
    const lease = gcra === undefined || this.closed ? undefined : this.current(subject, quota, ban, nowMs);
    if (!lease || unused(lease) < cost) return undefined;
    take(lease, cost);
    return outcomeOf(lease, gcra!, nowMs, cost);
  }

  /**
   * Rule 11, for the store: resolves once a notice newer than the recall says no lease of the key
   * is left (true), or at the recall's bound (false).
   */
  readonly recalled = (subject: string, recall: Recall): Promise<boolean> =>
    new Promise<boolean>((resolve) => {
      // A recall of this key went unanswered lately, and no lease has been granted since (Redis
      // grants none before the recall's 'le', 'rq', and any grant after it raises 'le'): the
      // holders this one waits for are those that did not answer then. Not waited for again.
      // The same 'le' only: a lower one is no older one but a state lost since (a Redis restarted
      // empty or failed over, the hash evicted), 'rq' with it, and a live lease granted after.
      const silent = this.silent.get(subject);
      if (silent && recall.leasedUntilMs === silent.leasedUntilMs && this.now() < silent.untilMs) {
        resolve(false);
        return;
      }
      const waiters = this.recalls.get(subject) ?? [];
      this.recalls.set(subject, waiters);
      // A warm lease (rule 15) may admit until its minute's end: a holder that cannot answer is
      // waited for no longer than a hot lease's life, leaseMs.
      const leftMs = Math.max(0, recall.leasedUntilMs - recall.nowMs);
      const boundMs = Math.min(leftMs, this.settings.leaseMs) + RECALL_GRACE_MS;
      let endsAtMs = this.now() + boundMs;
      const waiter: RecallWaiter = {
        seq: recall.seq,
        done: (heard = true) => {
          clearTimeout(timer);
          if (!heard) this.silent.set(subject, { leasedUntilMs: recall.leasedUntilMs, untilMs: this.now() + leftMs + RECALL_GRACE_MS });
          const left = this.recalls.get(subject)?.filter((w) => w !== waiter) ?? [];
          if (left.length > 0) this.recalls.set(subject, left);
          else this.recalls.delete(subject);
          resolve(heard);
        },
        within: (ms) => {
          if (this.now() + ms >= endsAtMs) return;
          endsAtMs = this.now() + ms;
          clearTimeout(timer);
          timer = setTimeout(() => waiter.done(false), ms);
        },
      };
      waiters.push(waiter);
      let timer = setTimeout(() => waiter.done(false), boundMs);
    });

  /**
   * Redis refused a request of this key: the window is spent (or the key banned), so this
   * replica's lease of it ends now rather than admit what is left of it after a ban.
   */
  refused(subject: string): void {
    const lease = this.leases.get(subject);
    if (lease) void this.end(subject, lease);
  }

  /** A key changed (plan, record, ban, unban) or, with null, anything may have: its leases end now. */
  forget(subject: string | null): void {
    // Missed notices (a lost subscription: a Redis restarted, failed over) may hide a state lost
    // and leases granted since: no recall is taken for unheard without waiting (rule 15).
    if (subject === null) this.silent.clear();
    const changed = (held: string) => subject === null || held === subject || held.startsWith('owner:');
    for (const [held, lease] of this.leases) {
      // A key may have moved to or from an owner's shared windows: owner leases end with any change.
      if (changed(held)) void this.end(held, lease);
    }
    for (const [held, ask] of this.asking) {
      if (changed(held)) {
        ask.cancelled = true;
        this.changedInFlight.add(held);
      }
    }
    // A lost ask is named alone under the key's quota only (its day and month edges decide which
    // windows the step reads as current, and writes): not until the key is seen again (`seen`).
    for (const held of this.renewing) if (changed(held)) this.changedInFlight.add(held);
    for (const [held, cancel] of this.cancels) if (changed(held)) cancel.quota = undefined;
  }

  /** A notice (rule 10): a leased key's counts changed, or it was banned; or a recall (rule 11). */
  private onNotice(notice: QuotaNotice): void {
    const waiters = this.recalls.get(notice.subject);
    // No lease's units may still come back (the store's unitsOut, quota-script.ts CLOCK): heard.
    // Else they may only until 'le' + the grace (a holder killed after its lease lapsed, the others
    // given back): no later than that.
    const le = notice.leasedUntilMs;
    if (waiters && le !== undefined) {
      const outMs = le === 0 ? 0 : le + RECALL_GRACE_MS - notice.nowMs;
      for (const waiter of [...waiters]) {
        if (notice.seq <= waiter.seq) continue;
        if (outMs <= 0) waiter.done();
        else waiter.within(outMs);
      }
    }
    const lease = this.leases.get(notice.subject);
    if (lease) {
      if (notice.recall && notice.seq > lease.seq) void this.end(notice.subject, lease);
      else this.apply(notice.subject, lease, notice);
      return;
    }
    const ask = this.asking.get(notice.subject);
    if (ask && notice.recall) ask.cancelled = true;
    if (ask && (!ask.heard || notice.seq > ask.heard.seq)) ask.heard = notice;
  }

  /** Applies a notice newer than what the lease last heard: a ban ends it, counts replace its own. */
  private apply(subject: string, lease: Lease, notice: QuotaNotice): void {
    if (notice.seq <= lease.seq) return;
    if (notice.bannedUntilMs > notice.nowMs) {
      void this.end(subject, lease);
      return;
    }
    // A notice from a later window: this lease stops before that window's counts matter to it,
    // but a renewal granted in that window may need them.
    const gcra = lease.quota.algorithm === 'gcra';
    if (notice.dayStartMs !== lease.dayStartMs || (!gcra && notice.minuteStartMs !== lease.minuteStartMs)) {
      if (!lease.later || notice.seq > lease.later.seq) lease.later = notice;
      return;
    }
    lease.seq = notice.seq;
    lease.minuteCount = notice.minuteCount;
    lease.dayCount = notice.dayCount;
    lease.monthCount = notice.monthCount ?? 0;
    lease.tatUs = notice.minuteTatUs;
    if (notice.creditBalance !== undefined) lease.creditBalance = notice.creditBalance;
  }

  /**
   * Shutdown: every lease gives its unused units back, and so does every block still on its way
   * (closed, it goes straight back when it arrives).
   */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.closed = true;
    // A give-back still failing (Redis away) gets one more try: shutdown does not wait for Redis.
    this.giveBacks.close();
    for (const waiters of [...this.recalls.values()]) for (const waiter of waiters) waiter.done();
    while (this.leases.size > 0 || this.inFlight.size > 0) {
      await Promise.all([...this.leases].map(([subject, lease]) => this.end(subject, lease)));
      await Promise.all(this.inFlight);
    }
    // Lost asks not named yet (rule 5) are named now, once, as a failing give-back is tried once
    // more: a replica shut down leaves no lost block counted. No ask goes out any more.
    for (const cancel of [...this.cancels.values()]) cancel.final?.();
    await Promise.all(this.inFlight);
  }

  private track<T>(step: Promise<T>): void {
    this.inFlight.add(step);
    void step.finally(() => this.inFlight.delete(step));
  }

  /** Fixed windows: null; gcra: its minute, or undefined when its tolerance cannot hold a block (rule 7). */
  private kindOf(quota: Quota): GcraWindow | null | undefined {
    if (quota.algorithm !== 'gcra') return null;
    if (this.kinds.has(quota)) return this.kinds.get(quota);
    const minute = gcraMinute(quota);
    const { leaseMs, minBlock, spread, replicas } = this.settings;
    const cells = Math.floor((minute.burst * minute.intervalUs - leaseMs * 1000) / minute.intervalUs);
    const kind = cells >= minBlock * spread * replicas ? minute : undefined;
    this.kinds.set(quota, kind);
    return kind;
  }

  private count(subject: string, cost: number, nowMs: number): Rate {
    const second = Math.floor(nowMs / 1000);
    const span = Math.floor(nowMs / WARM_SPAN_MS);
    let rate = this.rates.get(subject);
    if (!rate) {
      rate = {
        second,
        units: 0,
        previous: 0,
        quietUntilMs: 0,
        firstMs: nowMs,
        edge: Math.random(),
        span,
        spanUnits: 0,
        previousSpanUnits: 0,
      };
      this.rates.set(subject, rate);
    } else if (rate.second !== second) {
      rate.previous = rate.second === second - 1 ? rate.units : 0;
      rate.units = 0;
      rate.second = second;
      if (rate.span !== span) {
        rate.previousSpanUnits = rate.span === span - 1 ? rate.spanUnits : 0;
        rate.spanUnits = 0;
        rate.span = span;
      }
    }
    rate.units += cost;
    rate.spanUnits += cost;
    return rate;
  }

  private wanted(rate: Rate): number {
    const { leaseMs, minBlock, maxBlock } = this.settings;
    return Math.min(maxBlock, Math.max(minBlock, Math.ceil((perSecond(rate) * leaseMs) / 1000)));
  }

  /** An ask of `subject` numbered `no` whose answer never came: the next ask names the first such (rule 5). */
  private unanswered(subject: string, no: number): void {
    if (!this.lost.has(subject)) this.lost.set(subject, { from: no, atMs: this.now() });
  }

  /**
   * Rule 5: names `subject`'s first unanswered ask alone, CANCEL_AFTER_MS from now and as often
   * after while Redis does not answer, unless an ask of the key is on its way then (it names it)
   * or has been answered since (its step gave the block back). Exact as the next ask's name is:
   * Redis gives back the grant it recorded for this holder only if that grant's ask is the named
   * one or a later one, and no later one goes out while this step is on its way. Sent under the
   * key's quota as last seen (`quota`, then `seen`): its day and month edges decide which windows
   * the step reads as current, and writes back, so under a quota the key had before a change (a
   * billing anchor, a time zone) it would write the key's month or day back at 0. None is known
   * once the key changed (`forget`), until the key is seen again or its next ask names it.
   */
  private cancelLost(subject: string, quota: Quota | undefined, ban: BanPolicy): void {
    if (this.cancels.has(subject)) return;
    const cancel: Cancel = { sending: false, quota, ban };
    this.cancels.set(subject, cancel);
    // `final`: shutdown's one try (close), after every ask has been answered or failed.
    const attempt = (final = false) => {
      clearTimeout(cancel.timer);
      const lost = this.lost.get(subject);
      if (!lost || (this.closed && !final) || this.asking.has(subject) || this.renewing.has(subject)) {
        this.cancels.delete(subject);
        return;
      }
      if (!cancel.quota) {
        if (final) this.cancels.delete(subject);
        else later();
        return;
      }
      cancel.sending = true;
      const sent = this.store
        .reserve(subject, cancel.quota, cancel.ban, {
          ...NO_GIVE_BACK,
          // Nothing asked for: a step that only names the lost ask.
          want: 0,
          divisor: 1,
          minBlock: 1,
          cancelFrom: lost.from,
          leaseMs: this.settings.leaseMs,
          holder: this.holder,
        })
        .then(
          () => {
            this.cancels.delete(subject);
            if (this.lost.get(subject) === lost) this.lost.delete(subject);
          },
          () => {
            cancel.sending = false;
            if (final) this.cancels.delete(subject);
            else if (!this.closed) later();
          },
        );
      this.track(sent);
    };
    const later = () => {
      cancel.timer = setTimeout(attempt, CANCEL_AFTER_MS);
      cancel.timer.unref();
    };
    const final = () => attempt(true);
    cancel.final = final;
    later();
  }

  /** The quota `subject` is admitted under now: a lost ask of it named alone goes under it (`cancelLost`). */
  private seen(subject: string, quota: Quota, ban: BanPolicy): void {
    const cancel = this.cancels.get(subject);
    if (cancel && !cancel.sending) {
      cancel.quota = quota;
      cancel.ban = ban;
    }
  }

  /** Asks for a block this replica numbers `no` (gcra; rule 9), giving back one an unanswered ask was granted (rule 5). */
  private ask(subject: string, quota: Quota, ban: BanPolicy, { want, lifeMs }: LeaseAsk, no: number): Promise<LeaseGrant> {
    const { spread, replicas, minBlock } = this.settings;
    const lost = this.lost.get(subject);
    return this.store.reserve(subject, quota, ban, {
      ...(lost && { cancelFrom: lost.from }),
      want,
      divisor: spread * replicas,
      minBlock,
      leaseMs: lifeMs,
      ...NO_GIVE_BACK,
      block: no,
      holder: this.holder,
    });
  }

  private open(subject: string, quota: Quota, ban: BanPolicy, wanted: LeaseAsk, askedAtMs: number): void {
    if (this.cancels.get(subject)?.sending) return;
    const ask: Asking = { cancelled: false, answered: Promise.resolve() };
    this.asking.set(subject, ask);
    const no = ++this.asks;
    const rate = this.rates.get(subject)!;
    const asked = this.ask(subject, quota, ban, wanted, no).then(
      (grant) => {
        this.asking.delete(subject);
        this.changedInFlight.delete(subject);
        this.lost.delete(subject);
        if (grant.granted === 0) return this.quiet(rate, quota, grant, askedAtMs);
        const lease = this.leaseOf(quota, ban, grant, askedAtMs, no, wanted.lifeMs);
        // The key changed (or shutdown began) while the block was on its way: it goes straight back.
        if (ask.cancelled || this.closed || this.leases.has(subject)) return this.end(subject, lease);
        this.leases.set(subject, lease);
        // Notices can overtake the grant's reply (another connection).
        if (ask.heard) this.apply(subject, lease, ask.heard);
      },
      (err: unknown) => {
        this.asking.delete(subject);
        const changed = this.changedInFlight.delete(subject);
        this.unanswered(subject, no);
        this.cancelLost(subject, changed ? undefined : quota, ban);
        return new AskFailed(err);
      },
    );
    ask.answered = asked;
    this.track(asked);
  }

  private renew(subject: string, lease: Lease, rate: Rate, askedAtMs: number): void {
    if (askedAtMs < rate.quietUntilMs || this.cancels.get(subject)?.sending) return;
    const wanted = this.renewalAsk(lease, rate, askedAtMs);
    if (!wanted) return;
    const no = ++this.asks;
    this.renewing.add(subject);
    // Granted, this ask makes this holder's end in Redis its grant's time + wanted.lifeMs (rule
    // 10), whether or not its answer comes: a warm lease renewed by a hot ask (the key turned hot),
    // or by a warm one a few ms shorter, would otherwise admit past that end when the answer is
    // lost or late, 'le' falling under units still out. Its blocks stop by then, as the merged
    // block would (a hot lease's already do: the same life).
    const endsByMs = beforeHere(askedAtMs, wanted.lifeMs);
    for (const block of lease.blocks) block.expiresAtMs = Math.min(block.expiresAtMs, endsByMs);
    const asked = this.ask(subject, lease.quota, lease.ban, wanted, no).then(
      (grant) => {
        lease.renewal = undefined;
        this.renewing.delete(subject);
        this.changedInFlight.delete(subject);
        this.lost.delete(subject);
        if (grant.granted === 0) return this.quiet(rate, lease.quota, grant, askedAtMs);
        const next = this.leaseOf(lease.quota, lease.ban, grant, askedAtMs, no, wanted.lifeMs);
        if (this.leases.get(subject) !== lease) return this.end(subject, next);
        const gcra = lease.quota.algorithm === 'gcra';
        // gcra: only the UTC day is a window (rule 8); fixed: the minute too. A balance `set` since the
        // old blocks (rule 14), or counters made anew (Redis restarted empty): they go back on their
        // own, never into the new block (their give-back credits nothing then).
        const newWindow = grant.dayStartMs !== lease.dayStartMs || (!gcra && grant.minuteStartMs !== lease.minuteStartMs);
        const [first] = next.blocks;
        if (newWindow || lease.blocks.some((block) => block.creditEpoch !== first!.creditEpoch || block.hashEpoch !== first!.hashEpoch)) {
          // Granted in a new window: the old units stay in their window (the day gets them back).
          // This replica still holds the key (the new grant): it does not leave the holders.
          void this.end(subject, lease, false);
        } else if (gcra) {
          next.blocks = [...lease.blocks, ...next.blocks];
          lease.blocks = [];
        } else {
          next.blocks[0]!.left += unused(lease);
          // The same minute, so the same hour of usage: the old block's requests go with its units.
          for (const block of lease.blocks) next.blocks[0]!.requests += block.requests;
          lease.blocks = [];
        }
        // Notices newer than this grant may have reached the old lease first (another connection).
        // (Windows only move on: what the old lease applied is from the renewal's window.)
        if (lease.seq > next.seq) Object.assign(next, heardOf(lease));
        this.leases.set(subject, next);
        if (lease.later) this.apply(subject, next, lease.later);
      },
      (err: unknown) => {
        lease.renewal = undefined;
        this.renewing.delete(subject);
        const changed = this.changedInFlight.delete(subject);
        this.unanswered(subject, no);
        this.cancelLost(subject, changed ? undefined : lease.quota, lease.ban);
        return new AskFailed(err);
      },
    );
    lease.renewal = asked;
    this.track(asked);
  }

  /**
   * Redis refused a block: the key is near a limit (or banned, which the verdict cache answers).
   * No asking again this minute: near the limit every request goes to Redis anyway, and a key
   * refused a block each leaseMs would pay a command more per leaseMs for nothing. A gcra key
   * has no minute edge: it asks again once a full bucket would have drained (τ, at most a minute).
   */
  private quiet(rate: Rate, quota: Quota, grant: LeaseGrant, askedAtMs: number): void {
    const gcra = this.kindOf(quota);
    // A rule's window may be a day long: no ask before its end, but none of them quiet past a minute.
    const toMinuteEndMs = Math.min(grant.minuteStartMs + (grant.windowMs ?? MINUTE_MS) - grant.nowMs, MINUTE_MS);
    const waitMs = gcra ? Math.min((gcra.burst * gcra.intervalUs) / 1000, MINUTE_MS) : toMinuteEndMs;
    rate.quietUntilMs = beforeHere(askedAtMs, waitMs) + EDGE_MARGIN_MS;
  }

  private leaseOf(quota: Quota, ban: BanPolicy, grant: LeaseGrant, askedAtMs: number, no: number, lifeMs: number): Lease {
    // Before the end of its window (fixed: the minute; gcra: the day; either: the day and month of
    // the quota's calendar, rule 12), and before Redis's grant time + leaseMs: gcra's slots need it
    // (rule 8), and Redis publishes notices until then (rule 10).
    const periods = periodsAt(grant.nowMs, quota.calendar);
    const dayEndMs = Math.min(pick(periods.day, grant.nowMs)[1], pick(periods.month, grant.nowMs)[1]);
    const windowEndMs = quota.algorithm === 'gcra' ? dayEndMs : Math.min(grant.minuteStartMs + (grant.windowMs ?? MINUTE_MS), dayEndMs);
    const expiresAtMs = beforeHere(askedAtMs, Math.min(windowEndMs - grant.nowMs, lifeMs));
    const { granted: left, minuteStartMs, dayStartMs, monthStartMs = 0, minuteTatUs: tatUs } = grant;
    return {
      quota,
      ban,
      minuteStartMs,
      dayStartMs,
      blocks: [
        {
          left,
          requests: 0,
          expiresAtMs,
          minuteStartMs,
          dayStartMs,
          monthStartMs,
          no: quota.algorithm === 'gcra' ? no : 0,
          grantSeq: grant.seq,
          creditEpoch: grant.creditEpoch ?? 0,
          hashEpoch: grant.hashEpoch ?? 0,
        },
      ],
      lastBlock: left,
      seq: grant.seq,
      minuteCount: grant.minuteCount,
      dayCount: grant.dayCount,
      monthCount: grant.monthCount ?? 0,
      tatUs,
      creditBalance: grant.creditBalance ?? 0,
      storeNowMs: grant.nowMs,
      askedAtMs,
      heldUntilMs: grant.nowMs + lifeMs,
      lifeMs,
    };
  }

  /** Gives back the blocks that have ended; true when none is left (the lease is gone). */
  private expire(subject: string, lease: Lease, nowMs: number): boolean {
    // Blocks end in the order they were granted: the ended ones come first. An empty one sends
    // nothing, its end passing anyway, unless it is the last: that give-back ends the lease in
    // Redis (rule 10), or Redis would keep this replica among the holders for the grace, and a
    // refusal meanwhile would wait for units nobody holds (a request that took the last block's
    // every unit was counted in an earlier block: `take`).
    while (lease.blocks.length > 0 && nowMs >= lease.blocks[0]!.expiresAtMs) {
      const block = lease.blocks.shift()!;
      const last = lease.blocks.length === 0;
      if (block.left > 0 || block.requests > 0 || last) void this.giveBack(subject, lease, block, last);
    }
    if (lease.blocks.length > 0) return false;
    if (this.leases.get(subject) === lease) this.leases.delete(subject);
    return true;
  }

  /**
   * Ends a lease: its blocks go back newest first, one after the other (rule 9), the last step
   * leaving the key's holders in Redis (rule 10), even with nothing to give back, unless a newer
   * grant of this replica replaces it (`leaving` false; Redis keeps it among the holders anyway,
   * the newer grant's end being later).
   */
  private end(subject: string, lease: Lease, leaving = true): Promise<void> {
    if (this.leases.get(subject) === lease) this.leases.delete(subject);
    const blocks = lease.blocks.reverse().filter((block) => block.left > 0 || block.requests > 0);
    lease.blocks = [];
    if (blocks.length === 0 && leaving)
      blocks.push({
        left: 0,
        requests: 0,
        expiresAtMs: 0,
        minuteStartMs: 0,
        dayStartMs: 0,
        monthStartMs: 0,
        no: 0,
        grantSeq: 0,
        creditEpoch: 0,
        hashEpoch: 0,
      });
    return blocks.reduce<Promise<void>>(
      (previous, block, i) => previous.then(() => this.giveBack(subject, lease, block, leaving && i === blocks.length - 1)),
      Promise.resolve(),
    );
  }

  private giveBack(subject: string, lease: Lease, block: Block, ends: boolean): Promise<void> {
    const request = {
      want: 0,
      divisor: 1,
      minBlock: 1,
      leaseMs: lease.lifeMs,
      giveBack: block.left,
      giveBackRequests: block.requests,
      giveBackMinuteStartMs: block.minuteStartMs,
      giveBackDayStartMs: block.dayStartMs,
      giveBackMonthStartMs: block.monthStartMs,
      // gcra: the store finds its block's end by its number (rule 9).
      giveBackBlock: block.no,
      holder: this.holder,
      ends,
      heldUntilMs: lease.heldUntilMs,
      // Its unused units are credits too (rule 14).
      giveBackCredits: lease.quota.credits === 'required' ? block.left : 0,
      giveBackCreditEpoch: block.creditEpoch,
      giveBackHashEpoch: block.hashEpoch,
    };
    block.left = 0;
    block.requests = 0;
    // Redis unreachable: tried again once it is back, and applied once (lease-give-backs.ts).
    const given = this.giveBacks.give(subject, lease.quota, lease.ban, request);
    this.track(given);
    return given;
  }

  /** Ends expired leases (giving their units back) and forgets rates of keys gone quiet. */
  private sweep(): void {
    const nowMs = this.now();
    for (const [subject, lease] of this.leases) this.expire(subject, lease, nowMs);
    // Rates (one per key seen: many) once a second.
    const second = Math.floor(nowMs / 1000);
    if (second === this.ratesSweptIn) return;
    this.ratesSweptIn = second;
    for (const [subject, rate] of this.rates) {
      // A warm key's (rule 15) is kept over its span and the next: it may call every few seconds.
      const quietFor = this.settings.warmKeys ? (2 * WARM_SPAN_MS) / 1000 : 2;
      if (rate.second < second - quietFor && nowMs >= rate.quietUntilMs && !this.leases.has(subject)) this.rates.delete(subject);
    }
    for (const [subject, { atMs }] of this.lost) if (nowMs - atMs >= LOST_ASK_MS) this.lost.delete(subject);
    for (const [subject, { untilMs }] of this.silent) if (nowMs >= untilMs) this.silent.delete(subject);
  }
}

/** What a lease last heard of the store's counts (rule 10). */
function heardOf({
  seq,
  minuteCount,
  dayCount,
  monthCount,
  tatUs,
  creditBalance,
}: Lease): Pick<Lease, 'seq' | 'minuteCount' | 'dayCount' | 'monthCount' | 'tatUs' | 'creditBalance'> {
  return { seq, minuteCount, dayCount, monthCount, tatUs, creditBalance };
}

/** What an ask wants: units, and how long from its grant they may be admitted (Redis's 'le'). */
interface LeaseAsk {
  want: number;
  lifeMs: number;
}

/**
 * Rule 15: units per ms over this span and the one before, since this replica first saw the key; 0
 * with too little history. Counted from its first request, that request's unit marks the start, not
 * a unit of the rate (two calls 2.5 s apart are 0.4 a second, not 0.8).
 */
function warmPerMs(rate: Rate, nowMs: number): number {
  const spanStartMs = rate.span * WARM_SPAN_MS;
  const sinceMs = Math.max(rate.previousSpanUnits > 0 ? spanStartMs - WARM_SPAN_MS : spanStartMs, rate.firstMs);
  const elapsedMs = nowMs - sinceMs;
  const units = rate.previousSpanUnits + rate.spanUnits - (sinceMs === rate.firstMs ? 1 : 0);
  return elapsedMs < WARM_HISTORY_MS || units < WARM_MIN_UNITS ? 0 : units / elapsedMs;
}

/** Units per second: the last whole second's, or this one's so far when it is more. */
function perSecond(rate: Rate): number {
  return Math.max(rate.previous, rate.units);
}

function unused(lease: Lease): number {
  let units = 0;
  for (const block of lease.blocks) units += block.left;
  return units;
}

/** Takes `cost` units, oldest block first (every block here is in force); the first one counts the request. */
function take(lease: Lease, cost: number): void {
  let first = true;
  for (const block of lease.blocks) {
    if (first && block.left > 0) {
      block.requests += 1;
      first = false;
    }
    const units = Math.min(block.left, cost);
    block.left -= units;
    cost -= units;
    if (cost === 0) return;
  }
}

/**
 * A moment `toEndMs` after Redis read its clock, on this replica's clock, early rather than late:
 * Redis read its clock after the request was sent, so counting from the sending moment errs
 * early; less a margin for the two clocks' rates.
 */
function beforeHere(askedAtMs: number, toEndMs: number): number {
  return askedAtMs + toEndMs - EDGE_MARGIN_MS - toEndMs * EDGE_DRIFT;
}

/**
 * The outcome of a request admitted on a lease. The counts are the store's as last heard (rule
 * 10) with this lease's unused units taken off: counted, not yet admitted. The store's clock is
 * advanced by this replica's. gcra: the TAT as last heard less this lease's unused cells.
 */
function outcomeOf(lease: Lease, gcra: GcraWindow | null, nowMs: number, cost: number): QuotaOutcome {
  const left = unused(lease);
  return {
    verdict: 'allowed',
    minuteCount: lease.minuteCount - left,
    dayCount: lease.dayCount - left,
    monthCount: lease.quota.perMonth === undefined ? lease.monthCount : lease.monthCount - left,
    rejections: 0,
    nowMs: lease.storeNowMs + (nowMs - lease.askedAtMs),
    bannedUntilMs: 0,
    cost,
    minuteTatUs: gcra ? lease.tatUs - left * gcra.intervalUs : 0,
    // Credits (rule 14): the balance as last heard plus this lease's unused block.
    ...(lease.quota.credits === 'required' && { creditBalance: lease.creditBalance + left }),
  };
}

/** An ask's give-back part: none (an ask gives back only what it names, `cancelFrom`). */
const NO_GIVE_BACK = {
  giveBack: 0,
  giveBackMinuteStartMs: 0,
  giveBackDayStartMs: 0,
  giveBackMonthStartMs: 0,
  ends: false,
  heldUntilMs: 0,
};

/** What an ask's answer (`Asking.answered`, `Lease.renewal`) resolves to when the store failed it. */
class AskFailed {
  constructor(readonly err: unknown) {}
}
