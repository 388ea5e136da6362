import { webcrypto } from 'node:crypto';
import type { AssertionSecret } from './assertion-secrets.js';

// The assertion contract, shared by the gateway (signs) and the backend (verifies): neither imports
// the other. The gateway's signed statement of who is calling, for the upstream: a JWT (RFC 7519) in
// X-Tollgate-Assertion with iss, aud, sub (the key id), plan, scope (when the consumer holds
// scopes: space-separated), iat and exp. Short-lived, HMAC (HS256) with a secret both sides hold.
// A caller without a credential, on a route that admits them, gets no identity: the token then
// says `anonymous: true` and names no subject, plan or scope, beside X-Tollgate-Anonymous.

export const ASSERTION_HEADER = 'x-tollgate-assertion';
/** The consumer's key id and plan in plain headers; the backend checks them against the assertion. */
export const CONSUMER_ID_HEADER = 'x-tollgate-consumer-id';
export const CONSUMER_PLAN_HEADER = 'x-tollgate-plan';
/** `true` on a request admitted without a credential (and then no consumer id or plan header). */
export const ANONYMOUS_HEADER = 'x-tollgate-anonymous';
export const ASSERTION_ALG = 'HS256';

/**
 * The key as a WebCrypto key for jose's verification, imported once: jose re-imports a raw
 * Uint8Array on every call. (The gateway signs with node:crypto: src/gateway/assertion-signer.ts.)
 */
export function importAssertionKey(secret: AssertionSecret): Promise<webcrypto.CryptoKey> {
  return webcrypto.subtle.importKey('raw', secret.bytes, { name: 'HMAC', hash: 'SHA-256' }, false, ['verify']);
}
