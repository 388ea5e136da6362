import type { Pool } from 'undici';
import type { ServiceConfig } from '../config/services-schema.js';
import { targetsOf } from '../config/services-schema.js';
import { pick } from './balancer.js';
import { Target } from './target.js';

/** What a try is given: a target, or the verdict that none may be tried now. */
/** `panicked`: no target was in rotation, and this one was chosen among all of them (`panic: all`). */
export type Choice = { target: Target; panicked?: true } | { unavailable: true; retryAfterSeconds: number };

export interface ServiceEvents {
  ejected(service: string, target: string, forMs: number): void;
  panic(service: string): void;
  /** A new target's pool, for whoever watches pools. */
  pool(pool: Pool): void;
}

/**
 * One service: its targets, how a try chooses among them, and when a failing target is taken out.
 * - In rotation: targets neither ejected nor held out by probes (target-health.ts).
 * - Ejection is capped: at most ⌊maxEjectedPercent × targets⌋ ejected at once, a hard cap (Envoy
 *   ejects one host whatever its cap, and users of Envoy, Kong and Istio report whole services
 *   ejected). A target that fails past the cap stays in rotation, and retries go around it.
 * - No target in rotation (all held out by probes, or ejected under a 100 % cap): `panic: fail`
 *   answers 503 upstream_unavailable at once, with Retry-After at the next re-admission, and dials
 *   nothing but probes; `panic: all` tries every target anyway.
 * - A try never goes to a target the same request already tried, while another is left.
 */
export class Service {
  targets: Target[];
  /** The choice of a one-target service, made once. */
  private onlyTarget?: { target: Target };
  config: ServiceConfig;
  /** Requests and retries in flight: one count shared by every generation of the service (replaceWith). */
  private load = { inFlight: 0, retriesInFlight: 0 };
  /** The generation a reload put in this one's place: tries of requests that began here are chosen there. */
  private successor?: Service;

  constructor(
    config: ServiceConfig,
    private readonly now: () => number,
    private readonly events: ServiceEvents,
    reuse: ReadonlyMap<string, Target> = new Map(),
  ) {
    this.config = config;
    this.targets = targetsOf(config).map((t) => {
      const kept = reuse.get(t.url);
      if (!kept) {
        const target = new Target(t.url, t.weight, this.poolOptions(), config.ejection, now);
        events.pool(target.pool);
        return target;
      }
      kept.weight = t.weight;
      kept.health.setPolicy(config.ejection);
      const renewed = kept.renewPool(this.poolOptions());
      if (renewed) events.pool(renewed);
      return kept;
    });
    if (this.targets.length === 1) this.onlyTarget = { target: this.targets[0]! };
  }

  get name(): string {
    return this.config.name;
  }

  get inFlight(): number {
    return this.load.inFlight;
  }

  set inFlight(n: number) {
    this.load.inFlight = n;
  }

  get retriesInFlight(): number {
    return this.load.retriesInFlight;
  }

  set retriesInFlight(n: number) {
    this.load.retriesInFlight = n;
  }

  /**
   * A reload built `next` from this service's config (upstreams.ts). Requests in flight here end
   * on this object, so both count in one load (a copy would keep them forever in `next`'s count,
   * and a few reloads during retries would use up the retry budget for good); and their next
   * tries go to `next`'s targets, never to one the reload removed (its pool is closed).
   */
  replaceWith(next: Service): void {
    next.load = this.load;
    this.successor = next;
  }

  /** The generation in force: this one, or the latest a reload put in its place. */
  get current(): Service {
    return this.successor ? this.successor.current : this;
  }

  private poolOptions() {
    const { timeoutMs, tryTimeoutMs, maxSockets, tls } = this.config;
    return { timeoutMs: tryTimeoutMs || timeoutMs, maxSockets, tls };
  }

  /**
   * `countPanic`: false for a retry of a request whose earlier choice already panicked, so that
   * tollgate_upstream_panic_total counts requests, not tries.
   */
  choose(tried?: ReadonlySet<Target>, countPanic = true): Choice {
    if (this.successor) return this.successor.choose(tried, countPanic);
    // One target in rotation, nothing tried: the common case, without a filtered copy (and, while
    // it has never been ejected, without a clock read).
    if (this.targets.length === 1 && !tried && this.targets[0]!.health.inRotation()) return this.onlyTarget!;
    const nowMs = this.now();
    let inRotation = this.targets.filter((t) => t.health.inRotation(nowMs));
    const panicked = inRotation.length === 0;
    if (panicked) {
      if (countPanic) this.events.panic(this.name);
      if (this.config.panic === 'fail') return { unavailable: true, retryAfterSeconds: this.secondsToReadmission(nowMs) };
      inRotation = this.targets;
    }
    const untried = tried ? inRotation.filter((t) => !tried.has(t)) : inRotation;
    const candidates = untried.length ? untried : inRotation;
    const target = pick(this.config.balance, candidates, nowMs, this.config.slowStartMs);
    return panicked ? { target, panicked } : { target };
  }

  /** A try's outcome, for passive health: ok, or a failure that counts against the target. */
  report(target: Target, ok: boolean): void {
    if (this.successor) return this.successor.report(target, ok);
    if (ok) return target.health.succeeded();
    if (!target.health.failed()) return;
    if (this.ejectedCount() + 1 > this.maxEjected()) return;
    this.events.ejected(this.name, target.url, target.health.eject());
  }

  maxEjected(): number {
    return Math.floor((this.config.ejection.maxEjectedPercent * this.targets.length) / 100);
  }

  ejectedCount(nowMs = this.now()): number {
    let n = 0;
    for (const t of this.targets) if (t.health.ejected(nowMs)) n++;
    return n;
  }

  /** Whole seconds until some target may be back: the earliest re-admission, or the next probe. */
  private secondsToReadmission(nowMs: number): number {
    let soonest = Infinity;
    for (const t of this.targets) {
      if (t.health.readmitAtMs > nowMs) soonest = Math.min(soonest, t.health.readmitAtMs - nowMs);
      if (!t.health.probeHealthy && this.config.healthCheck) soonest = Math.min(soonest, this.config.healthCheck.intervalMs);
    }
    return Number.isFinite(soonest) ? Math.max(1, Math.ceil(soonest / 1000)) : 1;
  }
}
