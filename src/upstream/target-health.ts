/**
 * One target's standing, from two sources:
 * - passive (outlier detection): `consecutiveFailures` failed tries in a row — connect errors,
 *   resets, timeouts, 5xx answers — eject the target for `baseMs` × 2^(ejections so far), capped at
 *   `maxMs`, ±10 % jitter so that replicas do not re-admit in lockstep. A success resets the count;
 *   a target that stays clean for a whole `maxMs` after re-admission starts again from `baseMs`.
 *   Whether an ejection may happen at all is the service's call (its `maxEjectedPercent` cap).
 * - active (optional probes, health-probe.ts): `unhealthyThreshold` failed probes in a row take it
 *   out, `healthyThreshold` good ones bring it back.
 * A target is in rotation when neither holds it out. `since` is when it last came (back) into
 * rotation, for slow start.
 */
export interface EjectionPolicy {
  consecutiveFailures: number;
  baseMs: number;
  maxMs: number;
}

export class TargetHealth {
  private failuresInRow = 0;
  private ejections = 0;
  private ejectedUntilMs = 0;
  private probeFailures = 0;
  private probeSuccesses = 0;
  /** False once probes took the target out, until they bring it back. */
  probeHealthy = true;
  /** When the target last entered rotation (start, re-admission, probe recovery). */
  sinceMs: number;
  /** Ejections over the target's life, for metrics and the admin API. */
  ejectionsTotal = 0;

  constructor(
    private policy: EjectionPolicy,
    private readonly now: () => number,
    private readonly random: () => number = Math.random,
  ) {
    this.sinceMs = now();
  }

  setPolicy(policy: EjectionPolicy): void {
    this.policy = policy;
  }

  inRotation(nowMs?: number): boolean {
    // Never ejected (the usual case): no clock read.
    return this.probeHealthy && (this.ejectedUntilMs === 0 || !this.ejected(nowMs ?? this.now()));
  }

  ejected(nowMs = this.now()): boolean {
    if (this.ejectedUntilMs === 0) return false;
    if (nowMs < this.ejectedUntilMs) return true;
    // Re-admitted: on probation, a new ejection doubles the last one until maxMs of good standing.
    this.ejectedUntilMs = 0;
    this.sinceMs = nowMs;
    return false;
  }

  /** When an ejected target comes back (ms since epoch), else 0. */
  get readmitAtMs(): number {
    return this.ejectedUntilMs;
  }

  succeeded(): void {
    this.failuresInRow = 0;
    if (this.ejections > 0 && this.now() - this.sinceMs > this.policy.maxMs) this.ejections = 0;
  }

  /** A failed try; true when the target has now failed enough to be ejected (the caller decides). */
  failed(): boolean {
    this.failuresInRow++;
    return this.failuresInRow >= this.policy.consecutiveFailures && !this.ejected();
  }

  eject(): number {
    const nowMs = this.now();
    const lengthMs = Math.min(this.policy.baseMs * 2 ** this.ejections, this.policy.maxMs);
    const jittered = Math.round(lengthMs * (0.9 + 0.2 * this.random()));
    this.ejections++;
    this.ejectionsTotal++;
    this.failuresInRow = 0;
    this.ejectedUntilMs = nowMs + Math.max(1, jittered);
    return jittered;
  }

  /** A probe's result; returns true when it changed whether the target is in rotation by probe. */
  probed(ok: boolean, thresholds: { healthy: number; unhealthy: number }): boolean {
    if (ok) {
      this.probeFailures = 0;
      this.probeSuccesses++;
      if (!this.probeHealthy && this.probeSuccesses >= thresholds.healthy) {
        this.probeHealthy = true;
        this.sinceMs = this.now();
        return true;
      }
      return false;
    }
    this.probeSuccesses = 0;
    this.probeFailures++;
    if (this.probeHealthy && this.probeFailures >= thresholds.unhealthy) {
      this.probeHealthy = false;
      return true;
    }
    return false;
  }
}
