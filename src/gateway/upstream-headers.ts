import type { IncomingHttpHeaders } from 'node:http';

// Hop-by-hop headers (RFC 9110 §7.6.1) belong to one connection and are never forwarded, nor are
// the names a `Connection` header lists. Forwarding the client's `Connection: close` would also
// close our pooled keep-alive socket to the upstream.
const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade', 'proxy-authorization'];

/** Identity headers only the gateway may set; a client sending them is trying to impersonate. */
export const IDENTITY_PREFIXES = ['x-tollgate-', 'x-consumer-'];

export const CONSUMER_ID_HEADER = 'x-tollgate-consumer-id';
export const CONSUMER_PLAN_HEADER = 'x-tollgate-plan';

/** Removes from the request everything the upstream must not see from the client. */
export function stripClientHeaders(headers: IncomingHttpHeaders): void {
  const listed = headers.connection;
  if (typeof listed === 'string') {
    for (const name of listed.split(',')) delete headers[name.trim().toLowerCase()];
  }
  for (const name of HOP_BY_HOP) delete headers[name];
  delete headers.authorization;
  for (const name in headers) {
    if (name.startsWith('x-tollgate-') || name.startsWith('x-consumer-')) delete headers[name];
  }
}
