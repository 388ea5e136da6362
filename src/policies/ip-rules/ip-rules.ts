import { addressOf, CidrSet } from './cidr.js';
import type { IpRulesConfig } from './ip-rules-schema.js';

/**
 * One set of IP rules, compiled: deny first, then allow when there is an allow list. An address
 * that is not an address (a socket gone before it was read) matches no network: admitted where
 * there is no allow list, refused where there is one.
 */
export class IpRules {
  private readonly deny: CidrSet;
  private readonly allow: CidrSet | undefined;

  constructor(config: IpRulesConfig) {
    this.deny = new CidrSet(config?.deny ?? []);
    this.allow = config?.allow ? new CidrSet(config.allow) : undefined;
  }

  /** No rule at all: the policy skips the address parse. */
  get empty(): boolean {
    return this.deny.size === 0 && this.allow === undefined;
  }

  admits(clientAddress: string): boolean {
    if (this.empty) return true;
    const address = addressOf(clientAddress);
    if (!address) return this.allow === undefined;
    if (this.deny.has(address)) return false;
    return this.allow === undefined || this.allow.has(address);
  }
}

/** A key's `allowedCidrs`, compiled once per record object (records are cached and replaced whole on change). */
const keyRanges = new WeakMap<object, CidrSet>();

/** Whether a key restricted to `allowedCidrs` may be used from `clientAddress`; unrestricted keys always may. */
export function keyAdmits(record: { allowedCidrs?: readonly string[] }, clientAddress: string): boolean {
  const cidrs = record.allowedCidrs;
  if (!cidrs || cidrs.length === 0) return true;
  let set = keyRanges.get(record);
  if (!set) {
    set = new CidrSet(cidrs.filter((c) => typeof c === 'string'));
    keyRanges.set(record, set);
  }
  const address = addressOf(clientAddress);
  return address !== undefined && set.has(address);
}
