import type { Server } from 'node:http';
import type { Http2SecureServer } from 'node:http2';
import { rawErrorResponse } from '../errors/render.js';
import { PRI_REFUSED, refusePriMethod } from './pri-method.js';

/**
 * Malformed HTTP, oversized headers and header timeouts never reach a request handler; Node would
 * answer them with an empty 400. Answer them with an Error body instead, then close. A request line
 * with the method PRI, which llhttp may leave waiting instead of refusing, too (pri-method.ts).
 */
export function answerClientErrors(server: Server | Http2SecureServer): void {
  refusePriMethod(server);
  // The HTTP/1.1 side of a TLS listener (tls-listener.ts) emits it too.
  (server as Server).on('clientError', (err: NodeJS.ErrnoException, socket) => {
    // Never write while an earlier pipelined request on this socket still awaits its response: the
    // client would read our 400 as that request's answer (Node's default handler only checks that
    // the response has not started). And there is no one to answer after a reset.
    const requestInFlight = Boolean((socket as { _httpMessage?: unknown })._httpMessage);
    if (!socket.writable || err.code === 'ECONNRESET' || requestInFlight) {
      socket.destroy();
      return;
    }
    const code =
      err.code === 'HPE_HEADER_OVERFLOW'
        ? 'request_header_fields_too_large'
        : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? 'request_timeout'
          : 'bad_request';
    // HPE_PAUSED_H2_UPGRADE: a whole HTTP/2 preface (h2c with prior knowledge), which no HTTP/1.1 listener here takes.
    const message = err.code === 'HPE_PAUSED_H2_UPGRADE' ? PRI_REFUSED : 'The request is not valid HTTP/1.1.';
    socket.end(rawErrorResponse(code, code === 'bad_request' ? message : undefined));
  });
}
