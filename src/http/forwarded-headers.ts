import type { IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { forwardedEntries, type ProxyTrust } from './proxy-trust.js';

export interface ForwardedValues {
  'x-forwarded-for': string;
  'x-forwarded-host': string;
  'x-forwarded-proto': string;
  'x-forwarded-port': string;
}

/**
 * The X-Forwarded-* headers the upstream receives, written by the gateway, never passed through
 * from a client it does not trust.
 *
 * - `trustProxyHops` 0 (clients connect directly): all four describe this hop only — the
 *   socket's peer, the request's Host, the listener's scheme and port (from the socket, never from
 *   the port in a Host header the client wrote).
 * - N > 0 (N proxies in front, e.g. a load balancer): X-Forwarded-For keeps the last N entries,
 *   the ones those proxies appended, and the peer is appended after them; entries further left were
 *   written by the client and are dropped. Host, Proto and Port are taken from the nearest proxy
 *   when it sent them (it is expected to set, not append them: docs/security.md).
 * - `trustedProxies` (networks): as N > 0 when the peer is in one of them, keeping the entries from
 *   the client's (proxy-trust.ts) rightwards; as 0 when it is not.
 *
 * `host` is the Host the request is routed by (the absolute-form authority when there was one).
 */
export function forwardedValues(req: IncomingMessage, trust: ProxyTrust, host: string): ForwardedValues {
  const socket = req.socket;
  const peer = socket.remoteAddress ?? '';
  const own: ForwardedValues = {
    'x-forwarded-for': peer,
    'x-forwarded-host': host,
    'x-forwarded-proto': (socket as TLSSocket).encrypted ? 'https' : 'http',
    'x-forwarded-port': String(socket.localPort ?? ''),
  };
  const chain = trust.chain(req);
  if (!chain.peerTrusted) return own;
  const headers = req.headers;
  return {
    'x-forwarded-for': [...chain.believed, peer].join(', '),
    'x-forwarded-host': single(headers['x-forwarded-host']) ?? own['x-forwarded-host'],
    'x-forwarded-proto': single(headers['x-forwarded-proto']) ?? own['x-forwarded-proto'],
    'x-forwarded-port': single(headers['x-forwarded-port']) ?? own['x-forwarded-port'],
  };
}

/** The last comma-separated entry: the one the nearest proxy wrote if it appended. */
function single(value: string | string[] | undefined): string | undefined {
  const entries = forwardedEntries(value);
  const last = entries[entries.length - 1];
  return last && /^[\x21-\x7e]{1,255}$/.test(last) ? last : undefined;
}
