import type { IncomingHttpHeaders } from 'node:http';
import { connectionOptions } from '../http/connection-options.js';

// Hop-by-hop headers (RFC 9110 §7.6.1) belong to one connection and are never forwarded, nor are
// the names a `Connection` header lists. Forwarding the client's `Connection: close` would also
// close our pooled keep-alive socket to the upstream. `expect` is answered by the gateway itself
// (see server.ts), so the upstream never sees it.
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade', 'proxy-authorization', 'expect']);

/**
 * Names the client can never remove through `Connection` (RFC 9110 §7.6.1 lets a sender list any
 * name, which would let a client strip what routes or frames the request): the message framing and
 * Host, which the proxy sets itself, and the request id the gateway added. Identity and
 * X-Forwarded-* headers are set after this filter, so no client header can remove them either.
 */
const NEVER_CONNECTION_LISTED = new Set(['host', 'content-length', 'transfer-encoding', 'x-request-id']);

/**
 * Framing is decided by the gateway (src/http/request-framing.ts) and X-Forwarded-* are written
 * by it (forwarded-headers.ts); the client's own `Forwarded` (RFC 7239) is dropped rather than
 * trusted, as one convention (X-Forwarded-*) is easier to get right than two.
 */
const SET_BY_GATEWAY = new Set(['content-length', 'transfer-encoding', 'forwarded']);

/**
 * Fields some upstream frameworks take the request target or method from instead of the request
 * line (Symfony/Laminas/IIS URL Rewrite: X-Original-URL, X-Rewrite-URL; method-override
 * middleware): the route rules judged the request line, so the upstream must route by it too.
 */
const ROUTING_OVERRIDES = new Set(['x-original-url', 'x-rewrite-url', 'x-http-method-override', 'x-http-method', 'x-method-override']);

export { CONSUMER_ID_HEADER, CONSUMER_PLAN_HEADER } from '../identity/assertion.js';

/**
 * The request headers without everything the upstream must not see from the client. A new object
 * rather than `delete`s: deleting properties drops V8 into slow dictionary objects, which the
 * proxy then copies and walks several times per request (measured: 41 µs a request).
 */
export function withoutClientHeaders(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const connectionListed = connectionOptions(headers.connection);
  const clean: IncomingHttpHeaders = {};
  for (const name in headers) {
    if (
      clientMayNotSend(name) ||
      (connectionListed?.includes(name) && !NEVER_CONNECTION_LISTED.has(name)) ||
      // CGI-style upstreams (PHP-FPM, WSGI, Rack) read `_` as `-` (both are HTTP_X_FORWARDED_FOR):
      // an underscore spelling of a name the gateway owns would pass for the gateway's own field.
      (name.includes('_') && ownedByGateway(name.replace(/_/g, '-')))
    ) {
      continue;
    }
    clean[name] = headers[name];
  }
  return clean;
}

function clientMayNotSend(name: string): boolean {
  return (
    name === 'authorization' ||
    HOP_BY_HOP.has(name) ||
    SET_BY_GATEWAY.has(name) ||
    ROUTING_OVERRIDES.has(name) ||
    // identity headers only the gateway may set: a client sending them is impersonating
    name.startsWith('x-tollgate-') ||
    name.startsWith('x-consumer-')
  );
}

/** Every name the gateway removes or writes itself (Host, the request id, X-Forwarded-* included). */
function ownedByGateway(name: string): boolean {
  return clientMayNotSend(name) || name === 'host' || name === 'x-request-id' || name.startsWith('x-forwarded-');
}
