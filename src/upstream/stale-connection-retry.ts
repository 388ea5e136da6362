/**
 * The one case where the gateway sends a request to the upstream a second time: a kept-alive
 * connection the upstream closed (idle timeout, restart) just as the request was written to it.
 * The request is sent once more, on a new connection (connection-pool.ts `freshConnection`), when
 * all of these hold:
 * - the connection was found closed or reset before any response byte arrived (a response that
 *   had started, even a 1xx, is never replayed);
 * - the method is idempotent (RFC 9110 §9.2.2: GET, HEAD, OPTIONS, TRACE, PUT, DELETE), so a
 *   request that did reach the application before the close may be repeated without harm;
 * - no byte of its body was taken from the client yet (a body is streamed, never kept, so one
 *   that has started cannot be sent again);
 * - it has not been retried already, and its client is still there.
 * Everything else — a POST or PATCH, a request whose body had started, a second failure — gets
 * the 502 bad_gateway it would get without the rule. Retries are counted
 * (`tollgate_upstream_retries_total`).
 */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);

/** What undici reports for a connection closed or reset under a request (not a protocol fault). */
export function isClosedConnection(err: Error): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ECONNRESET' || code === 'EPIPE') return true;
  return code === 'UND_ERR_SOCKET' && err.message === 'other side closed';
}

export function mayResendOnFreshConnection(attempt: {
  method: string;
  error: Error;
  responseStarted: boolean;
  bodyBytesTaken: number;
  retried: boolean;
}): boolean {
  return (
    !attempt.retried &&
    !attempt.responseStarted &&
    attempt.bodyBytesTaken === 0 &&
    IDEMPOTENT.has(attempt.method) &&
    isClosedConnection(attempt.error)
  );
}
