import type { Logger } from '../observability/log.js';
import type { LoopLag } from '../observability/loop-lag.js';

/**
 * A small circuit breaker in front of the shared store. After a failure the store counts as down:
 * callers skip it (using their fallback at once instead of each waiting for a command timeout),
 * except one probe per `probeIntervalMs`, whose success brings everything back. Each transition is
 * logged once, not per request.
 *
 * A timeout that is no outage (`ownDelay`: one behind this process's own stalled event loop, or
 * while other calls are being answered) leaves the store up, and the caller sheds that request
 * instead of using its fallback (a busy gateway is not a dead Redis; docs/operations.md,
 * "Failure modes").
 */
export class StoreHealth {
  private down = false;
  private nextProbeAtMs = 0;
  private readonly listeners: Array<(down: boolean) => void> = [];

  constructor(
    private readonly name: string,
    private readonly logger: Logger,
    private readonly probeIntervalMs = 500,
    private readonly now: () => number = Date.now,
    private readonly ownDelay: (err: unknown, sinceSuccessMs: number) => boolean = () => false,
  ) {}

  /** When a call last succeeded (this.now()): Redis was answering then. */
  private lastSuccessAtMs = -Infinity;

  /** Whether to ask the store now: always when up; while down, only as the periodic probe. */
  shouldTry(): boolean {
    if (!this.down) return true;
    const nowMs = this.now();
    if (nowMs < this.nextProbeAtMs) return false;
    this.nextProbeAtMs = nowMs + this.probeIntervalMs;
    return true;
  }

  /** Down: a caller with no fallback of its own answers "unavailable" at once instead of waiting. */
  isDown(): boolean {
    return this.down;
  }

  /** A failed call: true when it counts against the store (now down), false when it was our own delay. */
  failed(err: unknown): boolean {
    if (!this.down && this.ownDelay(err, this.now() - this.lastSuccessAtMs)) return false;
    this.nextProbeAtMs = this.now() + this.probeIntervalMs;
    if (this.down) return true;
    this.down = true;
    const e = err as { code?: string; message?: string };
    this.logger.error({ store: this.name, err: { code: e?.code, message: e?.message } }, `${this.name} unavailable: degraded mode`);
    for (const listener of this.listeners) listener(true);
    return true;
  }

  succeeded(): void {
    this.lastSuccessAtMs = this.now();
    if (!this.down) return;
    this.down = false;
    this.logger.info({ store: this.name }, `${this.name} available again: normal mode`);
    for (const listener of this.listeners) listener(false);
  }

  onChange(listener: (down: boolean) => void): void {
    this.listeners.push(listener);
  }
}

/** ioredis's error for a command that timed out, which `timeoutNotOutage` tells apart. */
const COMMAND_TIMED_OUT = 'Command timed out';

/** A request that gave up on Redis at the end of its time (gateway/redis-wait.ts): judged as a command that timed out. */
export function commandTimedOut(): Error {
  return new Error(COMMAND_TIMED_OUT);
}

/**
 * `ownDelay` for a store reached with a command timeout of `commandTimeoutMs`. A timeout is not an
 * outage when this process's own loop stalled for half of it or more within the command's life (a
 * reply is read at the latest one loop turn after it arrives, so a healthy Redis only "times out"
 * behind a stall that long), nor while Redis answered any call within the last four timeouts (a
 * CPU-starved Redis is slow, not gone). A silent Redis is an outage once nothing was answered for
 * that long; a connection error is one at once. Either way local counting, which would admit past
 * the limit and count requests Redis may have counted too, waits for a real outage.
 */
export function timeoutNotOutage(lag: LoopLag, commandTimeoutMs: number): (err: unknown, sinceSuccessMs: number) => boolean {
  return (err, sinceSuccessMs) =>
    (err as Error | undefined)?.message === COMMAND_TIMED_OUT &&
    (sinceSuccessMs < commandTimeoutMs * 4 || lag.stalledWithin(commandTimeoutMs * 4, commandTimeoutMs / 2));
}

/**
 * An error Redis answered about one key's data (a key holding another type than the script reads,
 * e.g. after an operator's `SET` by hand): the store is up and answering, so this is no outage, and
 * the degraded mode's local counting would answer for a key Redis still holds. The request gets
 * the chain's 500 instead, and the key's owner an operator's fix.
 */
export function isDataError(err: unknown): boolean {
  return typeof (err as Error | undefined)?.message === 'string' && (err as Error).message.startsWith('WRONGTYPE');
}
