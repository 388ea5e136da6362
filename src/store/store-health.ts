import type { Logger } from '../observability/log.js';

/**
 * A small circuit breaker in front of the shared store. After a failure the store counts as down:
 * callers skip it (using their fallback at once instead of each waiting for a command timeout),
 * except one probe per `probeIntervalMs`, whose success brings everything back. Each transition is
 * logged once, not per request.
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
  ) {}

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

  failed(err: unknown): void {
    this.nextProbeAtMs = this.now() + this.probeIntervalMs;
    if (this.down) return;
    this.down = true;
    const e = err as { code?: string; message?: string };
    this.logger.error({ store: this.name, err: { code: e?.code, message: e?.message } }, `${this.name} unavailable: degraded mode`);
    for (const listener of this.listeners) listener(true);
  }

  succeeded(): void {
    if (!this.down) return;
    this.down = false;
    this.logger.info({ store: this.name }, `${this.name} available again: normal mode`);
    for (const listener of this.listeners) listener(false);
  }

  onChange(listener: (down: boolean) => void): void {
    this.listeners.push(listener);
  }
}
