import type { Server } from 'node:http';
import { rawErrorResponse } from '../errors/render.js';

/**
 * Malformed HTTP, oversized headers and header timeouts never reach a request handler; Node would
 * answer them with an empty 400. Answer them with an Error body instead, then close.
 */
export function answerClientErrors(server: Server): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    // As Node's default handler: never write into a response already under way on this socket
    // (pipelined requests), and there is no one to answer after a reset.
    const responseUnderWay = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent === true;
    if (!socket.writable || err.code === 'ECONNRESET' || responseUnderWay) {
      socket.destroy();
      return;
    }
    const code =
      err.code === 'HPE_HEADER_OVERFLOW'
        ? 'request_header_fields_too_large'
        : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? 'request_timeout'
          : 'bad_request';
    socket.end(rawErrorResponse(code, code === 'bad_request' ? 'The request is not valid HTTP/1.1.' : undefined));
  });
}
