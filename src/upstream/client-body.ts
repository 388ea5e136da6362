import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';

/** A body up to this size is kept while it streams, so that a retry can send it again. */
export const REPLAY_MAX_BYTES = 64 * 1024;

/**
 * The client's request body as undici reads it, instead of the request itself, for two reasons:
 * - undici destroys the body stream it was given when it stops writing it (the upstream answered
 *   early, or failed). Destroying an IncomingMessage destroys the client's socket; and a request
 *   read halfway and left paused keeps the client's next request stuck behind its unread body
 *   (the hang after an early 413). This stream is undici's to destroy; the request stays the
 *   gateway's, which drops its unread rest (http/discard-rest-of-body.ts).
 * - a retry may send the body again only when none of it was taken yet, or all of it was kept:
 *   bodies of at most REPLAY_MAX_BYTES are kept as they stream; a larger one is never replayed
 *   (retry-policy.ts).
 */
export class ClientBody extends Readable {
  takenBytes = 0;
  private kept: Buffer[] | undefined;
  private ended = false;
  /** Reading the client's request: from undici's first read (not before: nothing is taken while a try connects) until detached. */
  private attached = false;
  private detached = false;

  /**
   * `keep`: the request may be repeated once its body has gone (retry-policy.ts isRepeatable), so
   * a small body is worth keeping; any other body is only ever sent again untouched.
   */
  constructor(
    private readonly req: IncomingMessage,
    keep = true,
  ) {
    super();
    if (keep) this.kept = [];
  }

  private readonly onData = (chunk: Buffer): void => {
    this.takenBytes += chunk.length;
    if (this.kept) {
      if (this.takenBytes <= REPLAY_MAX_BYTES) this.kept.push(chunk);
      else this.kept = undefined;
    }
    if (!this.push(chunk)) this.req.pause();
  };

  private readonly onEnd = (): void => {
    this.ended = true;
    this.push(null);
  };

  private readonly onError = (err: Error): void => {
    this.destroy(err);
  };

  /** The client's body has arrived whole (its last byte read from the client). */
  get complete(): boolean {
    return this.ended;
  }

  override _read(): void {
    if (this.detached) return;
    if (!this.attached) {
      this.attached = true;
      this.req.on('data', this.onData).once('end', this.onEnd).once('error', this.onError);
    }
    this.req.resume();
  }

  /** Whether the body can go again (replay would give it). */
  canReplay(): boolean {
    return (this.takenBytes === 0 && !this.ended) || (this.ended && this.kept !== undefined);
  }

  /**
   * The body for another try: the rest of the request when none of it was taken yet, the kept
   * bytes when it arrived whole within REPLAY_MAX_BYTES, else undefined (it cannot go again).
   */
  replay(): ClientBody | Buffer | undefined {
    if (this.takenBytes === 0 && !this.ended) {
      this.destroy();
      return new ClientBody(this.req, this.kept !== undefined);
    }
    if (this.ended && this.kept) return Buffer.concat(this.kept);
    return undefined;
  }

  /** Lets go of the client's request, which stays paused where this left it. */
  detach(): void {
    if (this.detached) return;
    this.detached = true;
    if (!this.attached) return;
    this.req.off('data', this.onData).off('end', this.onEnd).off('error', this.onError);
    if (!this.req.complete) this.req.pause();
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    this.detach();
    callback(err);
  }
}
