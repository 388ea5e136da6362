import type { IncomingMessage } from 'node:http';
import type { ProxyTrust } from './proxy-trust.js';

/**
 * The client's address, for per-address limits, IP rules and the failed-authentication limit: the
 * socket's peer, or behind trusted proxies the address they say they received the request from
 * (proxy-trust.ts says which proxies are trusted and how the X-Forwarded-For chain is read).
 */
export function clientAddressOf(req: IncomingMessage, trust: ProxyTrust): string {
  return trust.chain(req).client;
}
