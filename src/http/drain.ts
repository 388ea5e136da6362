import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Listener } from './listen.js';

/**
 * The drain before a shutdown: for `delayMs` after it begins, the listener keeps serving (a load
 * balancer, or Kubernetes removing the pod from its Service's endpoints, takes a few seconds to
 * stop sending here), readiness answers 503, and every HTTP/1.1 response carries
 * `Connection: close`, so that each keep-alive client moves to another replica after its current
 * request instead of having its idle connection cut later. HTTP/2 sessions are told to go away when
 * the listener closes (closeGracefully). `delayMs` 0: no drain, the listener closes at once.
 */
export class Drain {
  private startedAt: number | undefined;

  constructor(private readonly delayMs: number) {}

  /** True from the moment the drain began: readiness reports it. */
  get active(): boolean {
    return this.startedAt !== undefined;
  }

  /** Marks responses of `server` with `Connection: close` while draining (HTTP/1.x only). Call after its handlers are in place. */
  attach(server: Listener): void {
    // First in line: the flag must be set before any handler writes the head.
    const mark = (req: IncomingMessage, res: ServerResponse) => {
      if (this.active && req.httpVersionMajor === 1) res.shouldKeepAlive = false;
    };
    server.prependListener('request', mark);
    // `Expect: 100-continue` requests arrive there instead, when the server listens for them (a
    // listener added here where there was none would stop Node's automatic 100).
    if (server.listenerCount('checkContinue') > 0) server.prependListener('checkContinue', mark);
  }

  /** Begins the drain and resolves when its delay is over. */
  begin(): Promise<void> {
    this.startedAt ??= Date.now();
    const left = this.startedAt + this.delayMs - Date.now();
    return left > 0 ? new Promise((resolve) => setTimeout(resolve, left)) : Promise.resolve();
  }
}
