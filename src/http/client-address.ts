import type { IncomingMessage } from 'node:http';
import { addressOf } from '../policies/ip-rules/cidr.js';
import type { ProxyTrust } from './proxy-trust.js';

/**
 * The client's address, for per-address limits, IP rules and the failed-authentication limit: the
 * socket's peer, or behind trusted proxies the address they say they received the request from
 * (proxy-trust.ts says which proxies are trusted and how the X-Forwarded-For chain is read).
 */
export function clientAddressOf(req: IncomingMessage, trust: ProxyTrust): string {
  return trust.chain(req).client;
}

/**
 * Who one client is, for what is counted per client (the anonymous consumer, the failed-authentication
 * limit): an IPv4 address (an IPv4-mapped IPv6 one as the IPv4 it carries), or an IPv6 /64. A
 * single host is usually given a whole /64 (RFC 6177) and may pick any address in it, so counting
 * per IPv6 address would give it 2⁶⁴ windows.
 */
export function clientOf(address: string): string {
  const parsed = addressOf(address);
  if (!parsed) return address;
  if (parsed.kind() === 'ipv4') return parsed.toString();
  return `${parsed.toNormalizedString().split(':').slice(0, 4).join(':')}::/64`;
}
