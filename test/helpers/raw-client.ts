import { connect, type Socket } from 'node:net';

export interface WireResponse {
  status: number;
  /** Header fields in order, names lower-cased. */
  headers: Array<[string, string]>;
  body: string;
}

export interface Exchange {
  /** Every response read, interim (1xx) ones included, in order. */
  responses: WireResponse[];
  /** The gateway closed the connection. */
  closed: boolean;
  raw: string;
}

export const headerOf = (response: WireResponse | undefined, name: string): string | undefined =>
  response?.headers.find(([n]) => n === name)?.[1];

/**
 * Writes raw bytes to `port` (or on the connection `port()` opens: TLS, say) (in `parts`, to control
 * when each piece goes) and reads responses
 * until `finalResponses` non-1xx ones are complete, the server closes, or `boundMs` passes (a
 * bound against hanging, not an assertion: tests check what arrived, never how fast).
 */
export function exchange(
  port: number | (() => Socket),
  parts: Array<string | Buffer>,
  opts: { finalResponses?: number; boundMs?: number; waitForClose?: boolean; head?: boolean; gapMs?: number } = {},
): Promise<Exchange> {
  const wanted = opts.finalResponses ?? 1;
  return new Promise((resolve) => {
    const socket = typeof port === 'number' ? connect(port, '127.0.0.1') : port();
    let data = Buffer.alloc(0);
    let closed = false;
    let settled = false;
    const finish = () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ responses: parseResponses(data, opts.head).responses, closed, raw: data.toString('latin1') });
    };
    const timer = setTimeout(finish, opts.boundMs ?? 5000);
    socket.on('data', (chunk) => {
      data = Buffer.concat([data, chunk]);
      const { responses } = parseResponses(data, opts.head);
      if (!opts.waitForClose && responses.filter((r) => r.status >= 200).length >= wanted) finish();
    });
    socket.on('close', () => {
      closed = true;
      finish();
    });
    socket.on('error', () => {});
    socket.on('connect', async () => {
      for (const part of parts) {
        if (socket.destroyed) return;
        socket.write(part);
        // `gapMs`: the next part comes that much later (a body still arriving while the request is forwarded).
        await new Promise((r) => (opts.gapMs ? setTimeout(r, opts.gapMs) : setImmediate(r)));
      }
    });
  });
}

/**
 * Reads complete responses (Content-Length, chunked, or bodiless 1xx/204/304, and every response
 * to a HEAD request when `head`) from a byte stream.
 */
export function parseResponses(bytes: Buffer, head = false): { responses: WireResponse[]; rest: Buffer } {
  const responses: WireResponse[] = [];
  let offset = 0;
  for (;;) {
    const end = bytes.indexOf('\r\n\r\n', offset);
    if (end === -1) break;
    const lines = bytes.subarray(offset, end).toString('latin1').split('\r\n');
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0]!)?.[1] ?? 0);
    const headers = lines.slice(1).map((line) => {
      const colon = line.indexOf(':');
      return [line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim()] as [string, string];
    });
    let cursor = end + 4;
    let body = '';
    const length = headers.find(([n]) => n === 'content-length')?.[1];
    const chunked = headers.some(([n, v]) => n === 'transfer-encoding' && /chunked/i.test(v));
    if (status >= 200 && status !== 204 && status !== 304 && !head) {
      if (length !== undefined) {
        if (bytes.length < cursor + Number(length)) break;
        body = bytes.subarray(cursor, cursor + Number(length)).toString('utf8');
        cursor += Number(length);
      } else if (chunked) {
        const parts: Buffer[] = [];
        let complete = false;
        for (;;) {
          const lineEnd = bytes.indexOf('\r\n', cursor);
          if (lineEnd === -1) break;
          const size = parseInt(bytes.subarray(cursor, lineEnd).toString('latin1'), 16);
          if (Number.isNaN(size) || bytes.length < lineEnd + 2 + size + 2) break;
          if (size === 0) {
            cursor = lineEnd + 4;
            complete = true;
            break;
          }
          parts.push(bytes.subarray(lineEnd + 2, lineEnd + 2 + size));
          cursor = lineEnd + 2 + size + 2;
        }
        if (!complete) break;
        body = Buffer.concat(parts).toString('utf8');
      } else {
        // Delimited by the close: only complete once the connection ended (the caller knows).
        body = bytes.subarray(cursor).toString('utf8');
        cursor = bytes.length;
      }
    }
    responses.push({ status, headers, body });
    offset = cursor;
  }
  return { responses, rest: bytes.subarray(offset) };
}
