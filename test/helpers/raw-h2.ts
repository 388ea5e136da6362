import { connect, type TLSSocket } from 'node:tls';

/** HTTP/2 frame types (RFC 9113 §6). */
export const FRAME = { DATA: 0, HEADERS: 1, RST_STREAM: 3, SETTINGS: 4, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8, CONTINUATION: 9 } as const;
export const FLAG = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4 } as const;
/** Error codes (RFC 9113 §7). */
export const H2_ERROR = { NO_ERROR: 0, PROTOCOL_ERROR: 1, CANCEL: 8, ENHANCE_YOUR_CALM: 11 } as const;

export interface Frame {
  type: number;
  flags: number;
  streamId: number;
  payload: Buffer;
}

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');

/**
 * An HTTP/2 client that writes frames byte by byte over TLS (ALPN h2), for what Node's http2 client
 * refuses to send (connection-specific fields, `TE: gzip`) and for the floods. Header blocks are
 * HPACK literals without indexing or Huffman coding (RFC 7541 §6.2.2), which any decoder reads.
 * Responses are not decoded: the tests read frame types, streams and error codes.
 */
export class RawH2 {
  readonly frames: Frame[] = [];
  closed = false;
  private pending = Buffer.alloc(0);

  private constructor(readonly socket: TLSSocket) {
    socket.on('data', (chunk: Buffer) => this.read(chunk));
    socket.on('close', () => (this.closed = true));
    socket.on('error', () => undefined);
  }

  static connect(port: number): Promise<RawH2> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port, ALPNProtocols: ['h2'], rejectUnauthorized: false }, () => {
        if (socket.alpnProtocol !== 'h2') return reject(new Error(`ALPN chose ${socket.alpnProtocol}`));
        const client = new RawH2(socket);
        socket.write(PREFACE);
        client.send(FRAME.SETTINGS, 0, 0, Buffer.alloc(0));
        resolve(client);
      });
      socket.once('error', reject);
    });
  }

  send(type: number, flags: number, streamId: number, payload: Buffer): boolean {
    return this.socket.write(frame(type, flags, streamId, payload));
  }

  /** A request's HEADERS frame: pseudo-fields first, as RFC 9113 §8.3 requires. */
  headers(streamId: number, fields: Array<[string, string]>, flags: number = FLAG.END_HEADERS | FLAG.END_STREAM): boolean {
    return this.send(FRAME.HEADERS, flags, streamId, headerBlock(fields));
  }

  rst(streamId: number, code: number = H2_ERROR.CANCEL): boolean {
    const payload = Buffer.alloc(4);
    payload.writeUInt32BE(code);
    return this.send(FRAME.RST_STREAM, 0, streamId, payload);
  }

  /** Resolves with the first frame received that `match` accepts; rejects after `timeoutMs`. */
  async waitFor(match: (f: Frame) => boolean, timeoutMs = 5000): Promise<Frame> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.frames.find(match);
      if (found) return found;
      if (Date.now() > deadline || this.closed) throw new Error(`no such frame; got types ${this.frames.map((f) => f.type).join(',')}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /** Resolves once the server closed the connection, or false after `timeoutMs`. */
  async untilClosed(timeoutMs = 5000): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!this.closed && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    return this.closed;
  }

  close(): void {
    this.socket.destroy();
  }

  private read(chunk: Buffer): void {
    this.pending = Buffer.concat([this.pending, chunk]);
    while (this.pending.length >= 9) {
      const length = this.pending.readUIntBE(0, 3);
      if (this.pending.length < 9 + length) return;
      const f: Frame = {
        type: this.pending[3]!,
        flags: this.pending[4]!,
        streamId: this.pending.readUInt32BE(5) & 0x7fffffff,
        payload: this.pending.subarray(9, 9 + length),
      };
      this.pending = this.pending.subarray(9 + length);
      this.frames.push(f);
      if (f.type === FRAME.SETTINGS && !(f.flags & FLAG.ACK)) this.send(FRAME.SETTINGS, FLAG.ACK, 0, Buffer.alloc(0));
    }
  }
}

export function frame(type: number, flags: number, streamId: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(streamId, 5);
  return Buffer.concat([head, payload]);
}

/** HPACK: each field a literal without indexing, new name, no Huffman (RFC 7541 §6.2.2). */
export function headerBlock(fields: Array<[string, string]>): Buffer {
  const parts: Buffer[] = [];
  for (const [name, value] of fields) parts.push(Buffer.from([0]), hpackString(name), hpackString(value));
  return Buffer.concat(parts);
}

function hpackString(text: string): Buffer {
  const bytes = Buffer.from(text, 'latin1');
  return Buffer.concat([hpackInteger(bytes.length, 7), bytes]);
}

/** RFC 7541 §5.1 integer with an N-bit prefix (the prefix's other bits 0: no Huffman). */
function hpackInteger(value: number, prefixBits: number): Buffer {
  const max = (1 << prefixBits) - 1;
  if (value < max) return Buffer.from([value]);
  const out = [max];
  let rest = value - max;
  while (rest >= 128) {
    out.push((rest % 128) + 128);
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
  return Buffer.from(out);
}

/** The pseudo-fields of a GET, then `fields`. */
export function getRequest(path: string, fields: Array<[string, string]> = [], authority = 'gateway.test'): Array<[string, string]> {
  return [[':method', 'GET'], [':scheme', 'https'], [':authority', authority], [':path', path], ...fields];
}
