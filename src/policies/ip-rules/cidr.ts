import ipaddr from 'ipaddr.js';

/** One network: an address family and the address and prefix length that delimit it. */
export type Cidr = [ipaddr.IPv4, number] | [ipaddr.IPv6, number];

/**
 * `198.51.100.0/24`, `2001:db8::/32`, or a bare address (one host: /32 or /128) → the network, or
 * the reason it is not one. Strict on purpose: IPv4 only in four decimal parts (ipaddr.js would
 * also read `0x7f.1` or `127.1`, which no operator means), no IPv6 zone. An IPv4-mapped IPv6
 * network (`::ffff:198.51.100.0/120`) is stored as the IPv4 one it is, since client addresses are
 * compared in that form too (addressOf).
 */
export function parseCidr(text: string): Cidr | string {
  const [address = '', bits, ...rest] = text.split('/');
  if (rest.length > 0) return 'must be an address or a CIDR like 198.51.100.0/24 or 2001:db8::/32';
  if (bits !== undefined && !/^\d{1,3}$/.test(bits)) return 'the prefix length after "/" must be a whole number';
  if (ipaddr.IPv4.isValidFourPartDecimal(address)) {
    const length = bits === undefined ? 32 : Number(bits);
    if (length > 32) return 'an IPv4 prefix length is at most 32';
    return [ipaddr.IPv4.parse(address), length];
  }
  if (address.includes(':') && !address.includes('%') && ipaddr.IPv6.isValid(address)) {
    const length = bits === undefined ? 128 : Number(bits);
    if (length > 128) return 'an IPv6 prefix length is at most 128';
    const v6 = ipaddr.IPv6.parse(address);
    if (v6.isIPv4MappedAddress() && length >= 96) return [v6.toIPv4Address(), length - 96];
    return [v6, length];
  }
  return 'must be an IPv4 or IPv6 address or CIDR like 198.51.100.0/24 or 2001:db8::/32';
}

/**
 * A client address as the socket or X-Forwarded-For gave it → the address compared with rules, or
 * undefined (not an address: no rule can match it). An IPv4-mapped IPv6 address (`::ffff:1.2.3.4`,
 * what a dual-stack listener reports for an IPv4 peer) is compared as the IPv4 address it carries.
 */
export function addressOf(text: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  if (!ipaddr.isValid(text)) return undefined;
  try {
    return ipaddr.process(text);
  } catch {
    return undefined;
  }
}

/** A list of networks, matched against one address at a time. */
export class CidrSet {
  private readonly v4: Array<[ipaddr.IPv4, number]> = [];
  private readonly v6: Array<[ipaddr.IPv6, number]> = [];

  /**
   * Networks checked by parseCidr before they were stored (config schema, key lifecycle); one that
   * is not a network anyway (a record edited by hand) matches nothing: it admits no one.
   */
  constructor(readonly cidrs: readonly string[]) {
    for (const text of cidrs) {
      const cidr = parseCidr(text);
      if (typeof cidr === 'string') continue;
      if (cidr[0].kind() === 'ipv4') this.v4.push(cidr as [ipaddr.IPv4, number]);
      else this.v6.push(cidr as [ipaddr.IPv6, number]);
    }
  }

  get size(): number {
    return this.cidrs.length;
  }

  has(address: ipaddr.IPv4 | ipaddr.IPv6): boolean {
    if (address.kind() === 'ipv4') {
      const v4 = address as ipaddr.IPv4;
      return this.v4.some((range) => v4.match(range));
    }
    const v6 = address as ipaddr.IPv6;
    return this.v6.some((range) => v6.match(range));
  }
}
