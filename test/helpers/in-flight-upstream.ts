import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import { CONSUMER_ID_HEADER } from '../../src/identity/assertion.js';

/**
 * An upstream that records, at every instant, how many requests (and WebSocket tunnels) of each
 * consumer it has in flight, and the most it ever had. A request with `hold` in its query stays
 * open until the test answers it (`answerAll`), or answers after `holdMs` ms of its own when the
 * query says `hold=<ms>`; `fail` in the query drops the connection (the gateway answers 502).
 * Any other request is answered at once; a WebSocket handshake opens an echo tunnel.
 */
export class InFlightUpstream {
  url = '';
  private server!: Server;
  private readonly wss = new WebSocketServer({ noServer: true });
  private readonly now = new Map<string, number>();
  private readonly peak = new Map<string, number>();
  private readonly held: ServerResponse[] = [];
  /** Every consumer's together: what a limit on something other than the consumer (an address) caps. */
  private total = 0;
  private totalPeak = 0;

  async start(): Promise<this> {
    this.server = createServer((req, res) => this.serve(req, res));
    this.server.on('upgrade', (req, socket, head) => {
      const consumer = consumerOf(req);
      this.wss.handleUpgrade(req, socket, head, (ws) => {
        this.enter(consumer);
        ws.once('close', () => this.leave(consumer));
        ws.on('message', (data) => ws.send(`echo:${String(data)}`));
      });
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  /** In flight now for `consumer` (a key id). */
  inFlight(consumer: string): number {
    return this.now.get(consumer) ?? 0;
  }

  /** The most ever in flight at once for `consumer`. */
  mostInFlight(consumer: string): number {
    return this.peak.get(consumer) ?? 0;
  }

  /** In flight now, every consumer's together. */
  get inFlightAll(): number {
    return this.total;
  }

  /** The most ever in flight at once, every consumer's together, since the last `resetPeakAll`. */
  get mostInFlightAll(): number {
    return this.totalPeak;
  }

  resetPeakAll(): void {
    this.totalPeak = this.total;
  }

  /** Requests held open now (every consumer's). */
  get holding(): number {
    return this.held.length;
  }

  /** Answers every held request. */
  answerAll(): void {
    for (const res of this.held.splice(0)) res.end('{"done":true}');
  }

  async stop(): Promise<void> {
    this.answerAll();
    for (const ws of this.wss.clients) ws.terminate();
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }

  private serve(req: IncomingMessage, res: ServerResponse): void {
    const consumer = consumerOf(req);
    const query = new URL(req.url ?? '/', 'http://upstream').searchParams;
    this.enter(consumer);
    // Out of flight when the exchange ends, whichever way (answered, or the gateway gave up).
    res.once('close', () => {
      this.leave(consumer);
      const i = this.held.indexOf(res);
      if (i >= 0) this.held.splice(i, 1);
    });
    req.resume();
    res.setHeader('content-type', 'application/json');
    if (query.has('fail')) {
      req.socket.destroy();
      return;
    }
    if (!query.has('hold')) {
      res.end('{"done":true}');
      return;
    }
    const ms = Number(query.get('hold'));
    if (ms > 0) setTimeout(() => res.end('{"done":true}'), ms);
    else this.held.push(res);
  }

  private enter(consumer: string): void {
    const count = this.inFlight(consumer) + 1;
    this.now.set(consumer, count);
    this.peak.set(consumer, Math.max(count, this.mostInFlight(consumer)));
    this.totalPeak = Math.max(++this.total, this.totalPeak);
  }

  private leave(consumer: string): void {
    this.now.set(consumer, this.inFlight(consumer) - 1);
    this.total--;
  }
}

function consumerOf(req: IncomingMessage): string {
  return String(req.headers[CONSUMER_ID_HEADER] ?? 'none');
}
