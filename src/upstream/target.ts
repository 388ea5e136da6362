import type { Pool } from 'undici';
import { connectionPool, type PoolOptions } from './connection-pool.js';
import { TargetHealth, type EjectionPolicy } from './target-health.js';

/** One instance of a service: its keep-alive pool, its load and its standing. */
export class Target {
  readonly origin: string;
  /** The target URL's path, prefixed to every request path ('' for a bare origin). */
  readonly basePath: string;
  readonly pool: Pool;
  readonly health: TargetHealth;
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
    this.pool = connectionPool(this.origin, pool);
    this.health = new TargetHealth(ejection, now);
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
