import type { Pool } from 'undici';
import { connectionPool, type PoolOptions } from './connection-pool.js';
import { TargetHealth, type EjectionPolicy } from './target-health.js';

/** One instance of a service: its keep-alive pool, its load and its standing. */
export class Target {
  readonly origin: string;
  /** The target URL's path, prefixed to every request path ('' for a bare origin). */
  readonly basePath: string;
  /** Replaced (renewPool) when a reload changes the service's pool settings. */
  pool: Pool;
  readonly health: TargetHealth;
  private poolOptions: PoolOptions;
  inFlight = 0;
  /** Smooth weighted round robin's running weight (balancer.ts). */
  current = 0;

  constructor(
    readonly url: string,
    public weight: number,
    pool: PoolOptions,
    ejection: EjectionPolicy,
    now: () => number,
  ) {
    const parsed = new URL(url);
    this.origin = parsed.origin;
    this.basePath = parsed.pathname === '/' ? '' : parsed.pathname.replace(/\/$/, '');
    this.poolOptions = pool;
    this.pool = connectionPool(this.origin, pool);
    this.health = new TargetHealth(ejection, now);
  }

  /**
   * A reload kept this target but changed its service's timeouts, connection cap or TLS: the next
   * tries go to a pool made with the new settings (undici fixes them per pool), and the old one
   * closes once its requests in flight are done. The new pool, or undefined when nothing changed.
   */
  renewPool(options: PoolOptions): Pool | undefined {
    if (JSON.stringify(options) === JSON.stringify(this.poolOptions)) return undefined;
    const old = this.pool;
    this.poolOptions = options;
    this.pool = connectionPool(this.origin, options);
    old.close().catch(() => undefined);
    return this.pool;
  }

  /**
   * Weight as the balancer sees it: during slow start a target back in rotation takes a share
   * growing linearly from 10 % to all of its weight.
   */
  effectiveWeight(nowMs: number, slowStartMs: number): number {
    if (slowStartMs <= 0) return this.weight;
    const age = nowMs - this.health.sinceMs;
    if (age >= slowStartMs) return this.weight;
    return this.weight * Math.max(0.1, age / slowStartMs);
  }

  /** Closes the pool once its requests in flight are done (a target removed by a reload). */
  drain(): void {
    this.pool.close().catch(() => undefined);
  }
}
