import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';

/**
 * The client's address, for per-address limits.
 *
 * Behind `trustedProxyHops` proxies (a load balancer: 1), each proxy appends the address it
 * received the request from to X-Forwarded-For, so the client is the entry `trustedProxyHops`
 * from the end. Entries further left were sent by the client itself and prove nothing. With 0
 * (the default: clients connect directly) the header is ignored and the socket's peer is the client.
 * Trusting hops when clients can reach the gateway directly lets them pick their own address.
 */
export function clientAddressOf(req: IncomingMessage, trustedProxyHops: number): string {
  const peer = req.socket.remoteAddress ?? 'unknown';
  if (trustedProxyHops <= 0) return peer;
  const header = req.headers['x-forwarded-for'];
  const entries = (Array.isArray(header) ? header.join(',') : (header ?? ''))
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);
  const forwarded = entries[entries.length - trustedProxyHops];
  // A request that did not come through the proxies (too few entries) counts under its peer.
  return forwarded && isIP(forwarded) ? forwarded : peer;
}
