import type { Duplex } from 'node:stream';
import { FrameCursor } from './websocket-frames.js';

/**
 * One direction of a WebSocket tunnel: what `from` sends is written to `to` as it comes, with the
 * backpressure pipe() would apply, while a FrameCursor follows the frames, so the relay can stop
 * between two frames and let the gateway add one of its own (a Close) without cutting a frame.
 */
export class FrameRelay {
  private readonly cursor = new FrameCursor();
  private onBoundary?: () => void;
  /** Stopped at a boundary: whatever `from` still sends is read and dropped. */
  stopped = false;
  private waiting = false;

  constructor(
    private readonly from: Duplex,
    private readonly to: Duplex,
    head?: Buffer,
  ) {
    if (head && head.length > 0) this.relay(head);
    from.on('data', (chunk: Buffer) => this.relay(chunk));
  }

  /** Stops at the next frame boundary (at once when between frames) and calls `then` there. */
  stopAtBoundary(then: () => void): void {
    if (this.stopped || this.onBoundary) return;
    this.onBoundary = then;
    if (this.cursor.atBoundary) this.stop();
  }

  private relay(chunk: Buffer): void {
    if (this.stopped) return;
    if (!this.onBoundary) {
      this.cursor.advance(chunk);
      this.write(chunk);
      return;
    }
    const read = this.cursor.advance(chunk, true);
    if (read > 0) this.write(read === chunk.length ? chunk : chunk.subarray(0, read));
    if (this.cursor.atBoundary) this.stop();
  }

  private stop(): void {
    this.stopped = true;
    // Read on to the end: the peer's own Close and the end of its connection still arrive.
    this.from.resume();
    this.onBoundary!();
  }

  private write(chunk: Buffer): void {
    if (this.to.write(chunk) || this.waiting) return;
    // The reader is slower than the writer: the writer waits for it.
    this.waiting = true;
    this.from.pause();
    this.to.once('drain', () => {
      this.waiting = false;
      if (!this.stopped) this.from.resume();
    });
  }
}
