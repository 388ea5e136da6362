import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';

/**
 * The client's request body as undici reads it, instead of the request itself, for two reasons:
 * - undici destroys the body stream it was given when it stops writing it (the upstream answered
 *   early, or failed). Destroying an IncomingMessage destroys the client's socket; and a request
 *   read halfway and left paused keeps the client's next request stuck behind its unread body
 *   (the hang after an early 413). This stream is undici's to destroy; the request stays the
 *   gateway's, which drops its unread rest (http/discard-rest-of-body.ts).
 * - `takenBytes` says whether any of the body left the client's request: a body that has started
 *   can never be sent again (stale-connection-retry.ts).
 */
export class ClientBody extends Readable {
  takenBytes = 0;
  private attached = true;

  constructor(private readonly req: IncomingMessage) {
    super();
    req.on('data', this.onData).once('end', this.onEnd).once('error', this.onError);
  }

  private readonly onData = (chunk: Buffer): void => {
    this.takenBytes += chunk.length;
    if (!this.push(chunk)) this.req.pause();
  };

  private readonly onEnd = (): void => {
    this.push(null);
  };

  private readonly onError = (err: Error): void => {
    this.destroy(err);
  };

  override _read(): void {
    if (this.attached) this.req.resume();
  }

  /** Lets go of the client's request, which stays paused where this left it. */
  detach(): void {
    if (!this.attached) return;
    this.attached = false;
    this.req.off('data', this.onData).off('end', this.onEnd).off('error', this.onError);
    if (!this.req.complete) this.req.pause();
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    this.detach();
    callback(err);
  }
}
