import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Samples } from './samples.js';

/** A GET request as raw HTTP/1.1 bytes (keep-alive), built once and written as is. */
export function rawGet(url: string, headers: Record<string, string>): Buffer {
  const target = new URL(url);
  let head = `GET ${target.pathname}${target.search} HTTP/1.1\r\nHost: ${target.host}\r\n`;
  for (const [name, value] of Object.entries(headers)) head += `${name}: ${value}\r\n`;
  return Buffer.from(`${head}\r\n`, 'latin1');
}

export interface RawResult {
  requests: number;
  ok: number;
  non2xx: number;
  errors: number;
  statusCounts: Record<string, number>;
  /** From the moment the request was written to the last byte of the answer. */
  latency: Samples;
  /** From the moment the request was due (open loop only): includes any wait for a free connection. */
  latencyFromDue: Samples;
  elapsedMs: number;
  /** Open loop: requests that found every connection busy and had to wait. */
  queued: number;
}

/** The answer's status (0: the connection broke) and its head (status line and fields). */
type Done = (status: number, head: string) => void;

/**
 * One keep-alive connection, one request at a time. The answer parser knows just enough HTTP/1.1
 * for the servers under test: a status line, headers, and a Content-Length or chunked body.
 */
class Connection {
  private socket!: Socket;
  private chunks: Buffer[] = [];
  private received = 0;
  private done: Done | null = null;
  private closing = false;

  constructor(
    private readonly host: string,
    private readonly port: number,
    private readonly onBroken: () => void,
  ) {
    this.open();
  }

  private open(): void {
    this.socket = connect({ host: this.host, port: this.port, noDelay: true });
    this.socket.on('data', (chunk: Buffer) => this.onData(chunk));
    this.socket.on('error', () => {});
    this.socket.on('close', () => {
      if (this.closing) return;
      const done = this.done;
      this.reset();
      if (done) {
        this.onBroken();
        done(0, '');
      }
      this.open();
    });
  }

  send(request: Buffer, done: Done): void {
    this.done = done;
    this.socket.write(request);
  }

  close(): void {
    this.closing = true;
    this.socket.destroy();
  }

  private reset(): void {
    this.chunks = [];
    this.received = 0;
    this.done = null;
  }

  private onData(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.received += chunk.length;
    const data = this.chunks.length === 1 ? chunk : Buffer.concat(this.chunks, this.received);
    this.chunks = [data];
    const headEnd = data.indexOf('\r\n\r\n');
    if (headEnd < 0) return;
    const head = data.toString('latin1', 0, headEnd);
    const status = Number(head.slice(9, 12));
    const length = /\r\ncontent-length:[ \t]*(\d+)/i.exec(head);
    let complete: boolean;
    if (length) complete = data.length >= headEnd + 4 + Number(length[1]);
    else if (/\r\ntransfer-encoding:[ \t]*chunked/i.test(head))
      complete = data.subarray(data.length - 5).toString('latin1') === '0\r\n\r\n';
    else complete = true;
    if (!complete) return;
    const done = this.done;
    this.reset();
    done?.(status, head);
  }
}

function newResult(): RawResult {
  return {
    requests: 0,
    ok: 0,
    non2xx: 0,
    errors: 0,
    statusCounts: {},
    latency: new Samples(),
    latencyFromDue: new Samples(),
    elapsedMs: 0,
    queued: 0,
  };
}

function count(result: RawResult, status: number): void {
  if (status === 0) return; // a broken connection, counted in `errors`
  result.requests++;
  if (status >= 200 && status < 300) result.ok++;
  else result.non2xx++;
  result.statusCounts[status] = (result.statusCounts[status] ?? 0) + 1;
}

function openConnections(url: string, n: number, result: RawResult): Connection[] {
  const target = new URL(url);
  return Array.from({ length: n }, () => new Connection(target.hostname, Number(target.port), () => result.errors++));
}

/**
 * Open loop at a fixed rate: request i is due at start + i/rate, whatever the answers do, and is
 * sent on an idle connection as soon as one is free. A timer tick every millisecond sends what
 * is due (so arrivals come in groups of rate/1000). Unlike autocannon's `overallRate` (each
 * connection sends its share of a second back to back, then waits for the next second), the
 * load is spread evenly, so latency is measured below saturation, not in a burst. `request` is one
 * request sent every time, or request i (in the order they are sent) for a changing one.
 */
export function openLoop(options: {
  url: string;
  request: Buffer | ((i: number) => Buffer);
  ratePerSecond: number;
  durationMs: number;
  connections: number;
  /** Called with every complete answer: its status and head (the exactness phase reads a field of it). */
  onAnswer?: (status: number, head: string) => void;
}): Promise<RawResult> {
  const result = newResult();
  const connections = openConnections(options.url, options.connections, result);
  const idle = [...connections];
  const waiting: number[] = [];
  const intervalMs = 1000 / options.ratePerSecond;
  const total = Math.round((options.durationMs / 1000) * options.ratePerSecond);
  let issued = 0;
  let answered = 0;
  let sent = 0;
  const { request } = options;
  const next = typeof request === 'function' ? () => request(sent++) : () => request;

  return new Promise((resolve) => {
    const startMs = performance.now();
    const dispatch = () => {
      while (waiting.length > 0 && idle.length > 0) {
        const dueMs = waiting.shift()!;
        const connection = idle.pop()!;
        const sentMs = performance.now();
        connection.send(next(), (status, head) => {
          const endMs = performance.now();
          if (status !== 0) {
            result.latency.add(endMs - sentMs);
            result.latencyFromDue.add(endMs - dueMs);
            options.onAnswer?.(status, head);
          }
          count(result, status);
          idle.push(connection);
          if (++answered === total) finish();
          else dispatch();
        });
      }
    };
    const tick = () => {
      const nowMs = performance.now();
      const due = Math.min(total, Math.floor((nowMs - startMs) / intervalMs) + 1);
      for (; issued < due; issued++) {
        if (idle.length === 0) result.queued++;
        waiting.push(startMs + issued * intervalMs);
      }
      dispatch();
      if (issued < total) timer = setTimeout(tick, 1);
    };
    let timer = setTimeout(tick, 0);
    const finish = () => {
      clearTimeout(timer);
      result.elapsedMs = performance.now() - startMs;
      for (const connection of connections) connection.close();
      resolve(result);
    };
  });
}

/**
 * Closed loop over changing requests (e.g. a different API key each time): `amount` requests,
 * `connections` at a time, request i is `request(i)`.
 */
export function closedLoopOver(options: {
  url: string;
  request: (i: number) => Buffer;
  amount: number;
  connections: number;
}): Promise<RawResult> {
  const result = newResult();
  const connections = openConnections(options.url, options.connections, result);
  let issued = 0;
  let answered = 0;
  return new Promise((resolve) => {
    const startMs = performance.now();
    const next = (connection: Connection) => {
      if (issued >= options.amount) return;
      const sentMs = performance.now();
      connection.send(options.request(issued++), (status) => {
        if (status !== 0) result.latency.add(performance.now() - sentMs);
        count(result, status);
        if (++answered === options.amount) {
          result.elapsedMs = performance.now() - startMs;
          for (const c of connections) c.close();
          resolve(result);
        } else next(connection);
      });
    };
    for (const connection of connections) next(connection);
  });
}
