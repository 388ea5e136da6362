import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';

/** One request as a strict HTTP/1.1 reader framed it from the bytes an upstream connection carried. */
export interface RecordedRequest {
  method: string;
  target: string;
  /** Header fields in order, names lower-cased. */
  headers: Array<[string, string]>;
  body: Buffer;
  /** The exact bytes of this request on the wire. */
  raw: Buffer;
}

/** How the upstream answers request `index` (0-based over its lifetime) on `socket`. */
export type Responder = (request: RecordedRequest, socket: Socket, index: number) => void;

export const okResponder: Responder = (request, socket) => {
  const body = JSON.stringify({ method: request.method, target: request.target });
  const head = `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n`;
  socket.write(request.method === 'HEAD' ? head : head + body);
};

/**
 * An upstream made of a `net` server: it records the exact bytes every connection carries and
 * frames them itself (Content-Length or chunked, RFC 9112 §6.3), so a test sees how many requests
 * the gateway really sent — a smuggled second request shows up as one more request, or as bytes
 * that frame no request at all (`garbage`). Each framed request is answered by `respond`.
 */
export class RecordingUpstream {
  readonly requests: RecordedRequest[] = [];
  /** Bytes left over on a connection that do not start a well-formed request. */
  readonly garbage: Buffer[] = [];
  /** Every byte received, per connection, in order. */
  readonly connections: Buffer[][] = [];
  respond: Responder = okResponder;
  private server!: Server;
  private readonly sockets = new Set<Socket>();
  url = '';

  async start(): Promise<this> {
    this.server = createServer((socket) => this.accept(socket));
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  header(request: RecordedRequest, name: string): string[] {
    return request.headers.filter(([n]) => n === name).map(([, v]) => v);
  }

  /** Drops every open connection (the gateway's pooled sockets too) and the records. */
  reset(): void {
    for (const socket of this.sockets) socket.destroy();
    this.requests.length = 0;
    this.garbage.length = 0;
    this.connections.length = 0;
    this.respond = okResponder;
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }

  private accept(socket: Socket): void {
    this.sockets.add(socket);
    const chunks: Buffer[] = [];
    this.connections.push(chunks);
    let pending: Buffer = Buffer.alloc(0);
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      pending = Buffer.concat([pending, chunk]);
      for (;;) {
        const framed = frameRequest(pending);
        if (framed === 'incomplete') return;
        if (framed === 'invalid') {
          this.garbage.push(pending);
          pending = Buffer.alloc(0);
          return;
        }
        pending = pending.subarray(framed.raw.length);
        const index = this.requests.push(framed) - 1;
        this.respond(framed, socket, index);
      }
    });
  }
}

/** Frames one request at the start of `bytes`, strictly (no obs-fold, one CL, only `chunked`). */
export function frameRequest(bytes: Buffer): RecordedRequest | 'incomplete' | 'invalid' {
  const end = bytes.indexOf('\r\n\r\n');
  if (end === -1) return bytes.length > 64 * 1024 ? 'invalid' : 'incomplete';
  const lines = bytes.subarray(0, end).toString('latin1').split('\r\n');
  // Methods as Node sends them (http.METHODS: capitals, and M-SEARCH's hyphen).
  const start = /^([A-Z][A-Z-]*) (\S+) HTTP\/1\.1$/.exec(lines[0]!);
  if (!start) return 'invalid';
  const headers: Array<[string, string]> = [];
  for (const line of lines.slice(1)) {
    const field = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[ \t]*(.*?)[ \t]*$/.exec(line);
    if (!field) return 'invalid';
    headers.push([field[1]!.toLowerCase(), field[2]!]);
  }
  const lengths = headers.filter(([n]) => n === 'content-length');
  const codings = headers.filter(([n]) => n === 'transfer-encoding');
  if (lengths.length > 1 || (lengths.length && codings.length)) return 'invalid';
  let offset = end + 4;
  let body: Buffer = Buffer.alloc(0);
  if (codings.length) {
    if (codings.length > 1 || codings[0]![1].toLowerCase() !== 'chunked') return 'invalid';
    const parts: Buffer[] = [];
    for (;;) {
      const lineEnd = bytes.indexOf('\r\n', offset);
      if (lineEnd === -1) return 'incomplete';
      const size = /^([0-9a-fA-F]+)(;.*)?$/.exec(bytes.subarray(offset, lineEnd).toString('latin1'));
      if (!size) return 'invalid';
      const n = parseInt(size[1]!, 16);
      offset = lineEnd + 2;
      if (n === 0) {
        // No trailers from the gateway: the last chunk is followed by the final CRLF.
        if (bytes.length < offset + 2) return 'incomplete';
        if (bytes.subarray(offset, offset + 2).toString('latin1') !== '\r\n') return 'invalid';
        offset += 2;
        break;
      }
      if (bytes.length < offset + n + 2) return 'incomplete';
      parts.push(bytes.subarray(offset, offset + n));
      offset += n + 2;
    }
    body = Buffer.concat(parts);
  } else if (lengths.length) {
    if (!/^\d+$/.test(lengths[0]![1])) return 'invalid';
    const n = Number(lengths[0]![1]);
    if (bytes.length < offset + n) return 'incomplete';
    body = bytes.subarray(offset, offset + n);
    offset += n;
  }
  return { method: start[1]!, target: start[2]!, headers, body, raw: bytes.subarray(0, offset) };
}
