import type { Server } from 'node:http';
import type { Http2SecureServer } from 'node:http2';
import type { Socket } from 'node:net';
import { Server as TlsServer, type TLSSocket } from 'node:tls';
import { rawErrorResponse } from '../errors/render.js';

/** How a request line with the PRI method starts (the method, then SP), after any empty lines. */
const PRI = Buffer.from('PRI ', 'latin1');
const CR = 0x0d;
const LF = 0x0a;

/** The Error body's message for PRI, here and for a whole preface llhttp refused (client-errors.ts). */
export const PRI_REFUSED =
  'PRI is not a request method: it starts an HTTP/2 connection preface, which an HTTP/1.1 connection does not take.';

/**
 * PRI is not a request method: it starts HTTP/2's connection preface,
 * `PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n` (RFC 9113 §3.4; §11.6: "never used by an actual client").
 * Having read a PRI request line, llhttp waits for the rest of that preface instead of header
 * fields, so a head that is a prefix of it, such as `PRI /v1 HTTP/1.1\r\n\r\n`, is neither a request
 * nor a parse error: Node emits nothing, and the client used to wait for the header timeout's 408.
 * Here an HTTP/1.1 connection whose first request line has the method PRI is answered 400 as soon as
 * the method has arrived, whatever follows, and ended as after any malformed head (client-errors.ts):
 * llhttp refuses the next bytes or the client's close, and that destroys it. HTTP/2 needs TLS and
 * ALPN `h2` here.
 *
 * Only the first request of a connection is looked at: a PRI pipelined behind another request on a
 * kept-alive connection is closed by the header timeout (408), as any head that never ends is.
 * The price: with a 'data' listener, node:http reads the connection through JS instead of handing
 * its bytes to llhttp in C++ (`consume`), for the life of the connection.
 */
export function refusePriMethod(server: Server | Http2SecureServer): void {
  if (server instanceof TlsServer) {
    // HTTP/2 sessions (ALPN h2) send the preface as they should: only HTTP/1.1 ones are read.
    server.on('secureConnection', (socket: TLSSocket) => {
      if (socket.alpnProtocol !== 'h2') watchFirstMethod(socket);
    });
  } else server.on('connection', watchFirstMethod);
}

/** Reads the first bytes of `socket` until they tell whether its first method is PRI, then lets go. */
function watchFirstMethod(socket: Socket): void {
  let matched = 0;
  const onData = (chunk: Buffer) => {
    for (let i = 0; i < chunk.length; i++) {
      const byte = chunk[i]!;
      // RFC 9112 §2.2: empty lines before the request line are skipped (llhttp skips CR and LF).
      if (matched === 0 && (byte === CR || byte === LF)) continue;
      if (byte !== PRI[matched]) return socket.off('data', onData);
      if (++matched === PRI.length) {
        socket.off('data', onData);
        // Not writable: a parse error of the same bytes was answered first (client-errors.ts).
        if (socket.writable) socket.end(rawErrorResponse('bad_request', PRI_REFUSED));
        return;
      }
    }
  };
  socket.on('data', onData);
}
