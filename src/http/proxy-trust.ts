import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import { addressOf, CidrSet } from '../policies/ip-rules/cidr.js';

/** The X-Forwarded-For chain as believed: the client, and the entries kept for the upstream. */
export interface ForwardedChain {
  /** The client's address: what per-address limits, IP rules and the failed-authentication limit count. */
  client: string;
  /** The X-Forwarded-For entries written by trusted proxies, from the client's rightwards. */
  believed: string[];
  /** Whether the socket's peer is a trusted proxy (its X-Forwarded-Host/-Proto/-Port are then believed too). */
  peerTrusted: boolean;
}

/**
 * Which peers are proxies whose X-Forwarded-For is believed (`gateway.trustProxyHops` or
 * `gateway.trustedProxies`; the schema allows one of them).
 *
 * - By count (`trustProxyHops: N`): the last N entries were appended by the N proxies in front, so
 *   the client is the Nth entry from the end; with fewer entries (a request that did not come
 *   through them) or one that is not an address, the socket's peer. Only safe when clients cannot
 *   reach the gateway around those proxies.
 * - By network (`trustedProxies`, as Express's proxy-addr): walk from the socket's peer leftwards
 *   through X-Forwarded-For while the address is in a trusted network; the first one that is not
 *   is the client. A client that connects directly is never trusted, so its header is ignored.
 *   When every hop is trusted the left-most is the client; an entry that is not an address ends
 *   the walk, and the request counts under the trusted proxy that wrote it.
 */
export class ProxyTrust {
  static readonly none = new ProxyTrust({ trustProxyHops: 0, trustedProxies: [] });
  private readonly hops: number;
  private readonly networks: CidrSet;

  constructor(gateway: { trustProxyHops: number; trustedProxies: readonly string[] }) {
    this.hops = gateway.trustProxyHops;
    this.networks = new CidrSet(gateway.trustedProxies);
  }

  chain(req: IncomingMessage): ForwardedChain {
    const peer = req.socket.remoteAddress ?? 'unknown';
    if (this.networks.size > 0) return this.byNetwork(peer, req.headers['x-forwarded-for']);
    if (this.hops <= 0) return { client: peer, believed: [], peerTrusted: false };
    const entries = forwardedEntries(req.headers['x-forwarded-for']);
    const forwarded = entries[entries.length - this.hops];
    return {
      client: forwarded && isIP(forwarded) ? forwarded : peer,
      believed: entries.slice(-this.hops),
      peerTrusted: true,
    };
  }

  private byNetwork(peer: string, header: string | string[] | undefined): ForwardedChain {
    if (!this.trusts(peer)) return { client: peer, believed: [], peerTrusted: false };
    const entries = forwardedEntries(header);
    let client = peer;
    for (let i = entries.length - 1; i >= 0; i--) {
      const entry = entries[i]!;
      if (!isIP(entry)) return { client, believed: entries.slice(i + 1), peerTrusted: true };
      client = entry;
      if (!this.trusts(entry)) return { client, believed: entries.slice(i), peerTrusted: true };
    }
    return { client, believed: entries, peerTrusted: true };
  }

  private trusts(address: string): boolean {
    const parsed = addressOf(address);
    return parsed !== undefined && this.networks.has(parsed);
  }
}

/** X-Forwarded-For's entries, left to right, over every copy of the header. */
export function forwardedEntries(value: string | string[] | undefined): string[] {
  if (value === undefined) return [];
  return (Array.isArray(value) ? value.join(',') : value)
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);
}
