import type { BanPolicy, Quota } from '../config/plans-schema.js';
import type { LeaseGrant, QuotaStore } from '../store/quota-store.js';
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
 * 6. Headers: remaining = Redis's remaining at the last grant (every lease counted as used) plus
 *    this lease's unused units. It never exceeds what was left at that grant less what this replica
 *    used since; it under-reports by the units out on other replicas' leases.
 *
 * gcra plans take no lease: a reserved cell used later than its slot would let later requests
 * through early, breaking the any-60-s-span promise (docs/quota-leases.md).
 */
export interface LeaseSettings {
  leaseMs: number;
  hotPerSecond: number;
  minBlock: number;
  maxBlock: number;
  spread: number;
  /** Replicas sharing the Redis (gateway.yaml quota.replicas). */
  replicas: number;
}

interface Lease {
  quota: Quota;
  ban: BanPolicy;
  /** The windows (store clock) its units were taken from. */
  minuteStartMs: number;
  dayStartMs: number;
  /** Units still to admit here. */
  left: number;
  /** The last block granted: renewal starts when half of it is used. */
  lastBlock: number;
  /** The store's counts and clock at the last grant, and this replica's clock when it was asked. */
  minuteCount: number;
  dayCount: number;
  storeNowMs: number;
  askedAtMs: number;
  /** This replica's clock: admit only before both. */
  windowEndsAtMs: number;
  expiresAtMs: number;
  renewing: boolean;
}

interface Rate {
  second: number;
  units: number;
  previous: number;
  /** After a refused reservation (near the limit): no new ask before this. */
  quietUntilMs: number;
}

/** Margin before the window's end on this clock: covers clock rate drift over a minute (0.1 %) and more. */
const EDGE_MARGIN_MS = 10;
const EDGE_DRIFT = 0.001;

type ReservingStore = Required<Pick<QuotaStore, 'reserve'>>;

export class QuotaLeases {
  private readonly leases = new Map<string, Lease>();
  private readonly rates = new Map<string, Rate>();
  /** Reservations on their way, per subject; `cancelled` when the key changed meanwhile. */
  private readonly asking = new Map<string, { cancelled: boolean }>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly store: ReservingStore,
    private readonly settings: LeaseSettings,
    /** A monotonic clock in ms (performance.now); injected by tests. */
    private readonly now: () => number = () => performance.now(),
  ) {
    this.timer = setInterval(() => this.sweep(), Math.max(10, Math.min(settings.leaseMs, 1000) / 2));
    this.timer.unref();
  }

  /** Units of this key leased here now (tests, metrics). */
  held(subject: string): number {
    return this.leases.get(subject)?.left ?? 0;
  }

  /**
   * The outcome of a request admitted against this replica's lease of `subject`, or undefined:
   * then the store decides, exactly as without leases. Also counts the key's rate and, for a hot
   * key, asks for a lease in the background.
   */
  admit(subject: string, quota: Quota, ban: BanPolicy, cost: number): QuotaOutcome | undefined {
    if (quota.algorithm === 'gcra') return undefined;
    const nowMs = this.now();
    const rate = this.count(subject, cost, nowMs);
    let lease = this.leases.get(subject);
    if (lease && (lease.quota !== quota || lease.ban !== ban || nowMs >= lease.expiresAtMs)) {
      void this.end(subject, lease);
      lease = undefined;
    }
    if (lease) {
      if (lease.left >= cost) {
        lease.left -= cost;
        if (!lease.renewing && lease.left * 2 < lease.lastBlock) this.renew(subject, lease, rate, nowMs);
        return outcomeOf(lease, nowMs, cost);
      }
      if (!lease.renewing) this.renew(subject, lease, rate, nowMs);
      return undefined;
    }
    if (perSecond(rate) >= this.settings.hotPerSecond && nowMs >= rate.quietUntilMs && !this.asking.has(subject)) {
      this.open(subject, quota, ban, rate, nowMs);
    }
    return undefined;
  }

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
    for (const [held, lease] of this.leases) {
      // A key may have moved to or from an owner's shared windows: owner leases end with any change.
      if (subject === null || held === subject || held.startsWith('owner:')) void this.end(held, lease);
    }
    for (const [held, ask] of this.asking) {
      if (subject === null || held === subject || held.startsWith('owner:')) ask.cancelled = true;
    }
  }

  /** Shutdown: every lease gives its unused units back. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    const giving = [...this.leases].map(([subject, lease]) => this.end(subject, lease));
    await Promise.all(giving);
  }

  private count(subject: string, cost: number, nowMs: number): Rate {
    const second = Math.floor(nowMs / 1000);
    let rate = this.rates.get(subject);
    if (!rate) {
      rate = { second, units: 0, previous: 0, quietUntilMs: 0 };
      this.rates.set(subject, rate);
    } else if (rate.second !== second) {
      rate.previous = rate.second === second - 1 ? rate.units : 0;
      rate.units = 0;
      rate.second = second;
    }
    rate.units += cost;
    return rate;
  }

  private wanted(rate: Rate): number {
    const { leaseMs, minBlock, maxBlock } = this.settings;
    return Math.min(maxBlock, Math.max(minBlock, Math.ceil((perSecond(rate) * leaseMs) / 1000)));
  }

  private ask(subject: string, quota: Quota, ban: BanPolicy, rate: Rate): Promise<LeaseGrant> {
    const { spread, replicas, minBlock } = this.settings;
    return this.store.reserve(subject, quota, ban, {
      want: this.wanted(rate),
      divisor: spread * replicas,
      minBlock,
      giveBack: 0,
      giveBackMinuteStartMs: 0,
      giveBackDayStartMs: 0,
    });
  }

  private open(subject: string, quota: Quota, ban: BanPolicy, rate: Rate, askedAtMs: number): void {
    const ask = { cancelled: false };
    this.asking.set(subject, ask);
    this.ask(subject, quota, ban, rate).then(
      (grant) => {
        this.asking.delete(subject);
        if (grant.granted === 0) return this.quiet(rate, grant, askedAtMs);
        // The key changed while the block was on its way: it goes straight back.
        if (ask.cancelled || this.leases.has(subject)) return void this.giveBack(subject, quota, ban, grant.granted, grant);
        this.leases.set(subject, this.leaseOf(quota, ban, grant, askedAtMs, grant.granted));
      },
      () => this.asking.delete(subject),
    );
  }

  private renew(subject: string, lease: Lease, rate: Rate, askedAtMs: number): void {
    if (askedAtMs < rate.quietUntilMs) return;
    lease.renewing = true;
    this.ask(subject, lease.quota, lease.ban, rate).then(
      (grant) => {
        lease.renewing = false;
        if (grant.granted === 0) return this.quiet(rate, grant, askedAtMs);
        if (this.leases.get(subject) !== lease) return void this.giveBack(subject, lease.quota, lease.ban, grant.granted, grant);
        if (grant.minuteStartMs !== lease.minuteStartMs || grant.dayStartMs !== lease.dayStartMs) {
          // Granted in a new window: the old units stay in their window (the day gets them back).
          void this.end(subject, lease);
          this.leases.set(subject, this.leaseOf(lease.quota, lease.ban, grant, askedAtMs, grant.granted));
          return;
        }
        this.leases.set(subject, this.leaseOf(lease.quota, lease.ban, grant, askedAtMs, lease.left + grant.granted));
      },
      () => (lease.renewing = false),
    );
  }

  /**
   * Redis refused a block: the key is near a limit (or banned, which the verdict cache answers).
   * No asking again this minute: near the limit every request goes to Redis anyway, and a key
   * refused a block each leaseMs would pay a command more per leaseMs for nothing.
   */
  private quiet(rate: Rate, grant: LeaseGrant, askedAtMs: number): void {
    rate.quietUntilMs = windowEndHere(grant, askedAtMs) + EDGE_MARGIN_MS;
  }

  private leaseOf(quota: Quota, ban: BanPolicy, grant: LeaseGrant, askedAtMs: number, left: number): Lease {
    const windowEndsAtMs = windowEndHere(grant, askedAtMs);
    return {
      quota,
      ban,
      minuteStartMs: grant.minuteStartMs,
      dayStartMs: grant.dayStartMs,
      left,
      lastBlock: grant.granted,
      minuteCount: grant.minuteCount,
      dayCount: grant.dayCount,
      storeNowMs: grant.nowMs,
      askedAtMs,
      windowEndsAtMs,
      expiresAtMs: Math.min(windowEndsAtMs, this.now() + this.settings.leaseMs),
      renewing: false,
    };
  }

  private end(subject: string, lease: Lease): Promise<void> {
    if (this.leases.get(subject) === lease) this.leases.delete(subject);
    const units = lease.left;
    lease.left = 0;
    if (units <= 0) return Promise.resolve();
    return this.giveBack(subject, lease.quota, lease.ban, units, lease);
  }

  private giveBack(
    subject: string,
    quota: Quota,
    ban: BanPolicy,
    units: number,
    from: { minuteStartMs: number; dayStartMs: number },
  ): Promise<void> {
    const request = {
      want: 0,
      divisor: 1,
      minBlock: 1,
      giveBack: units,
      giveBackMinuteStartMs: from.minuteStartMs,
      giveBackDayStartMs: from.dayStartMs,
    };
    // Unreachable Redis: the units stay counted, lost to this window only (docs/quota-leases.md).
    return this.store.reserve(subject, quota, ban, request).then(
      () => undefined,
      () => undefined,
    );
  }

  /** Ends expired leases (giving their units back) and forgets rates of keys gone quiet. */
  private sweep(): void {
    const nowMs = this.now();
    for (const [subject, lease] of this.leases) if (nowMs >= lease.expiresAtMs) void this.end(subject, lease);
    const second = Math.floor(nowMs / 1000);
    for (const [subject, rate] of this.rates) {
      if (rate.second < second - 2 && nowMs >= rate.quietUntilMs && !this.leases.has(subject)) this.rates.delete(subject);
    }
  }
}

/** Units per second: the last whole second's, or this one's so far when it is more. */
function perSecond(rate: Rate): number {
  return Math.max(rate.previous, rate.units);
}

/**
 * The end of the grant's minute on this replica's clock, early rather than late: Redis read its
 * clock after the request was sent, so counting from the sending moment errs early; less a margin
 * for the two clocks' rates.
 */
function windowEndHere(grant: LeaseGrant, askedAtMs: number): number {
  const toEndMs = grant.minuteStartMs + MINUTE_MS - grant.nowMs;
  return askedAtMs + toEndMs - EDGE_MARGIN_MS - toEndMs * EDGE_DRIFT;
}

/**
 * The outcome of a request admitted on a lease. The counts are the store's at the last grant
 * with this lease's unused units taken off: remaining never exceeds what was left then, less
 * what this replica has used since. The store's clock is advanced by this replica's.
 */
function outcomeOf(lease: Lease, nowMs: number, cost: number): QuotaOutcome {
  return {
    verdict: 'allowed',
    minuteCount: lease.minuteCount - lease.left,
    dayCount: lease.dayCount - lease.left,
    rejections: 0,
    nowMs: lease.storeNowMs + (nowMs - lease.askedAtMs),
    bannedUntilMs: 0,
    cost,
    minuteTatUs: 0,
  };
}
