/**
 * How late this process's event loop has been lately: a timer that should fire every `tickMs`
 * notes how much later than that it ran. A Redis command that "timed out" while the loop was
 * stalled (a busy process, a CPU-starved machine, a SIGSTOP) may have had its reply sitting in the
 * socket all along: ioredis's timeout timer fires in the timers phase, before the poll phase reads
 * that reply. Such a timeout says nothing about Redis (store-health.ts asks `stalledWithin`).
 */
export class LoopLag {
  private lastTickMs: number;
  /** Stalls of at least `minStallMs`, newest last: when each ended and how long it was. */
  private readonly stalls: Array<{ endedMs: number; lagMs: number }> = [];
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly tickMs = 20,
    private readonly minStallMs = 10,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.lastTickMs = this.now();
    this.timer = setInterval(() => this.tick(), tickMs);
    this.timer.unref();
  }

  private tick(): void {
    const nowMs = this.now();
    const lagMs = nowMs - this.lastTickMs - this.tickMs;
    this.lastTickMs = nowMs;
    if (lagMs < this.minStallMs) return;
    this.stalls.push({ endedMs: nowMs, lagMs });
    // Only the recent past is ever asked about: keep a handful.
    if (this.stalls.length > 64) this.stalls.splice(0, this.stalls.length - 64);
  }

  /**
   * The longest the loop was stalled within the last `windowMs`, the stall under way now (the
   * tick overdue at this moment) included.
   */
  worstWithinMs(windowMs: number): number {
    const nowMs = this.now();
    let worstMs = Math.max(0, nowMs - this.lastTickMs - this.tickMs);
    for (let i = this.stalls.length - 1; i >= 0; i--) {
      const stall = this.stalls[i]!;
      // A stall overlaps the window when it ended inside it (it began lagMs before it ended).
      if (stall.endedMs < nowMs - windowMs) break;
      worstMs = Math.max(worstMs, stall.lagMs);
    }
    return worstMs;
  }

  /** Whether the loop stalled for at least `stallMs` within the last `windowMs`. */
  stalledWithin(windowMs: number, stallMs: number): boolean {
    return this.worstWithinMs(windowMs) >= stallMs;
  }

  close(): void {
    clearInterval(this.timer);
  }
}
