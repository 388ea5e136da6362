import { createHmac, hkdfSync } from 'node:crypto';
import { clientOf } from '../http/client-address.js';
import type { Consumer } from './consumer.js';

/** Characters of the digest kept in an id: 132 bits of base64url, no collision among any number of addresses. */
const DIGEST_CHARS = 22;

/**
 * The consumer of a request without a credential, on a route that admits such callers: one per
 * client address (an IPv6 client per /64), `anon:<digest>`, so that the one quota step, its headers and bans treat it as
 * any other. The digest is an HMAC of the address under a key derived (HKDF) from a secret every
 * replica shares (the assertion secret), so every replica counts one address under one id, and
 * the address is in no Redis key, log line or admin listing in a form that can be reversed by
 * trying all 2³² IPv4 addresses (a plain hash could). A secret rotation starts new windows.
 */
export class AnonymousConsumers {
  private readonly key: Buffer;

  constructor(sharedSecret: Uint8Array) {
    this.key = Buffer.from(hkdfSync('sha256', sharedSecret, 'tollgate', 'anonymous consumer id', 32));
  }

  /** The anonymous consumer of `address` (the trusted client address) on `plan`. */
  of(address: string, plan: string): Consumer {
    const digest = createHmac('sha256', this.key).update(clientOf(address)).digest('base64url').slice(0, DIGEST_CHARS);
    return { id: `anon:${digest}`, plan, anonymous: true };
  }
}
