import { connect, type Socket } from 'node:net';
import { Client } from 'undici';
import { headerOf, parseResponses, type WireResponse } from '../raw-client.js';
import { sleep, until } from './upstream.js';

/**
 * How long any one step may take before the tests call it a hang. A bound against hanging, never a
 * speed check: every step here takes milliseconds on loopback, and the gateway's own client
 * timeouts (headersTimeoutMs 10 s, requestTimeoutMs 60 s) are not what is under test.
 */
export const HANG_BOUND_MS = 15_000;

export interface GatewayAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/**
 * One client keep-alive connection to the gateway (undici's Client: a single connection, one
 * request at a time), with a per-request bound so that a hang fails the test instead of stalling
 * it, and a count of the TCP connections it had to open.
 */
export class GatewayClient {
  private readonly client: Client;
  connects = 0;

  constructor(
    url: string,
    private readonly key?: string,
  ) {
    this.client = new Client(url, { pipelining: 1, headersTimeout: HANG_BOUND_MS, bodyTimeout: HANG_BOUND_MS });
    this.client.on('connect', () => this.connects++);
  }

  async request(
    method: 'GET' | 'HEAD' | 'POST',
    path: string,
    opts: { headers?: Record<string, string>; body?: Buffer } = {},
  ): Promise<GatewayAnswer> {
    const headers: Record<string, string> = { ...(this.key ? { authorization: `Bearer ${this.key}` } : {}), ...opts.headers };
    if (opts.body) headers['content-type'] ??= 'application/octet-stream';
    const res = await this.client.request({ method, path, headers, body: opts.body });
    const chunks: Buffer[] = [];
    for await (const chunk of res.body) chunks.push(chunk as Buffer);
    return { status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) };
  }

  close(): Promise<void> {
    return this.client.close();
  }
}

/** A raw client connection, for what undici would hide: which requests went on which connection, and how it ended. */
class RawConnection {
  private readonly socket: Socket;
  private data = Buffer.alloc(0);
  closed = false;

  constructor(port: number) {
    this.socket = connect(port, '127.0.0.1');
    this.socket.on('data', (chunk: Buffer) => (this.data = Buffer.concat([this.data, chunk])));
    this.socket.on('error', () => undefined); // a reset is a close here; 'close' follows
    this.socket.on('close', () => (this.closed = true));
  }

  /** Final (non-1xx) responses read so far. */
  responses(): WireResponse[] {
    return parseResponses(this.data).responses.filter((r) => r.status >= 200);
  }

  /** Writes `bytes`; false when the peer neither took them nor closed within the bound. */
  async write(bytes: Buffer | string): Promise<boolean> {
    if (this.closed) return true;
    if (this.socket.write(bytes)) return true;
    return until(() => this.closed || this.socket.writableLength === 0, HANG_BOUND_MS);
  }

  destroy(): void {
    this.socket.destroy();
  }
}

export interface EarlyAnswerOutcome {
  /** Final responses on the connection, in order: the POST's first. */
  responses: WireResponse[];
  /** Requests written (the POST and the follow-up GETs sent before any close). */
  requestsSent: number;
  closed: boolean;
  /** The step that neither completed nor ended in a close within HANG_BOUND_MS. */
  hung?: string;
}

/**
 * A client as fetch is one: a POST with a `bodyBytes` body to `path`, the whole body written (the
 * upstream may answer before reading it) unless the connection closes, then `followUps` GETs of
 * `getPath` on the same connection, each sent once the previous answer arrived. Records what
 * arrived and whether any step hung.
 */
export async function earlyAnswerThenMore(
  port: number,
  key: string,
  opts: { path: string; bodyBytes: number; getPath: string; followUps: number },
): Promise<EarlyAnswerOutcome> {
  const connection = new RawConnection(port);
  const auth = `Authorization: Bearer ${key}\r\n`;
  const outcome = (requestsSent: number, hung?: string): EarlyAnswerOutcome => {
    connection.destroy();
    return { responses: connection.responses(), requestsSent, closed: connection.closed, hung };
  };
  try {
    const head = `POST ${opts.path} HTTP/1.1\r\nHost: interop.test\r\n${auth}Content-Type: application/octet-stream\r\nContent-Length: ${opts.bodyBytes}\r\n\r\n`;
    if (!(await connection.write(head))) return outcome(1, 'the POST head was never taken');
    const chunk = Buffer.alloc(64 * 1024, 'x');
    for (let sent = 0; sent < opts.bodyBytes && !connection.closed; sent += chunk.length) {
      const piece = chunk.subarray(0, Math.min(chunk.length, opts.bodyBytes - sent));
      if (!(await connection.write(piece))) {
        return outcome(
          1,
          `the gateway stopped reading the POST body after ${sent} of ${opts.bodyBytes} bytes and kept the connection open`,
        );
      }
    }
    if (!(await until(() => connection.closed || connection.responses().length >= 1, HANG_BOUND_MS))) {
      return outcome(1, 'no answer to the POST and no close');
    }
    let requestsSent = 1;
    for (let i = 0; i < opts.followUps && !connection.closed; i++) {
      const answered = connection.responses().length;
      if (!(await connection.write(`GET ${opts.getPath} HTTP/1.1\r\nHost: interop.test\r\n${auth}\r\n`))) {
        return outcome(requestsSent + 1, `follow-up GET ${i + 1} was never taken`);
      }
      requestsSent++;
      if (!(await until(() => connection.closed || connection.responses().length > answered, HANG_BOUND_MS))) {
        return outcome(requestsSent, `no answer to follow-up GET ${i + 1} and no close`);
      }
    }
    // A close may follow the last answer: give it a moment to arrive so `closed` is what happened.
    await sleep(50);
    return outcome(requestsSent);
  } catch (err) {
    connection.destroy();
    throw err;
  }
}

/**
 * The connection ended cleanly for the client: every request written was answered, or the last
 * answer said `Connection: close` (RFC 9112 §9.6) so the client knew not to send more on it.
 */
export function endedCleanly(outcome: EarlyAnswerOutcome): boolean {
  if (outcome.responses.length >= outcome.requestsSent) return true;
  const last = outcome.responses.at(-1);
  return /\bclose\b/i.test(headerOf(last, 'connection') ?? '');
}

/**
 * How long the upstream keeps an idle connection open after a response, measured on the wire: a
 * GET straight to it, then the time until it closes (undefined: not within the bound).
 */
export async function measureIdleCloseMs(upstreamUrl: string, path: string): Promise<number | undefined> {
  const { port } = new URL(upstreamUrl);
  const connection = connect(Number(port), '127.0.0.1');
  let data = Buffer.alloc(0);
  let answeredAt: number | undefined;
  let closedAt: number | undefined;
  connection.on('data', (chunk: Buffer) => {
    data = Buffer.concat([data, chunk]);
    if (answeredAt === undefined && parseResponses(data).responses.length > 0) answeredAt = performance.now();
  });
  connection.on('error', () => undefined);
  connection.on('close', () => (closedAt = performance.now()));
  connection.write(`GET ${path} HTTP/1.1\r\nHost: interop.test\r\n\r\n`);
  await until(() => closedAt !== undefined, HANG_BOUND_MS);
  connection.destroy();
  return answeredAt !== undefined && closedAt !== undefined ? closedAt - answeredAt : undefined;
}
