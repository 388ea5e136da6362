import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { connectionOptions } from '../http/connection-options.js';

// Hop-by-hop response headers (RFC 9110 §7.6.1): they describe the upstream connection, not ours.
// Copying the upstream's `Connection: keep-alive` would also override a client's `Connection:
// close` (Node keeps the socket open when the handler sets it). Transfer-Encoding is re-chosen by
// Node for the client connection.
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

/**
 * Copies the upstream's response headers onto the client response. Headers the gateway already
 * set win (request id, rate-limit fields, and a route rule's `Deprecation`/`Sunset`: the
 * operator's rule is the promise to clients), except `Link`, whose values are merged
 * (RFC 8288 §3: a field may carry many links), the gateway's first, and `Vary`, whose names are.
 */
export function copyResponseHeaders(headers: IncomingHttpHeaders, res: ServerResponse, corsApplies = false): string[] {
  const copied: string[] = [];
  const listed = connectionOptions(headers.connection);
  for (const name in headers) {
    if (HOP_BY_HOP.has(name) || listed?.includes(name)) continue;
    // Where gateway.yaml's `cors:` applies, the gateway alone says which origins may read the
    // answer: an upstream's own Access-Control-* fields (a `*` of its own, credentials) would
    // widen what the operator allowed.
    if (corsApplies && name.startsWith('access-control-')) continue;
    const value = headers[name]!;
    if (!res.hasHeader(name)) {
      res.setHeader(name, value);
      copied.push(name);
    } else if (name === 'link') {
      res.setHeader('link', mergeLinks(String(res.getHeader('link')), value));
    } else if (name === 'vary') {
      // The gateway's `Vary: Origin` (cors) and the upstream's own reasons both hold.
      res.setHeader('vary', mergeVary(String(res.getHeader('vary')), value));
    }
  }
  /** The names taken from the upstream, so an error answer can drop them again. */
  return copied;
}

function mergeVary(ours: string, theirs: string | string[]): string {
  const names = [ours, ...(Array.isArray(theirs) ? theirs : [theirs])].flatMap((v) => v.split(',')).map((v) => v.trim());
  return names.filter((name, i) => name !== '' && names.findIndex((n) => n.toLowerCase() === name.toLowerCase()) === i).join(', ');
}

function mergeLinks(ours: string, theirs: string | string[]): string {
  const values = [ours, ...(Array.isArray(theirs) ? theirs : [theirs])];
  return values.filter((value, i) => value !== '' && values.indexOf(value) === i).join(', ');
}
