import { createHmac, createSecretKey, type KeyObject } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { AssertionSettings } from '../config/assertion-schema.js';
import { ASSERTION_ALG } from '../identity/assertion.js';
import type { AssertionSecret } from '../identity/assertion-secrets.js';

interface CachedToken {
  token: string;
  /** Its `iat`: with the clock stepped back before it, a fresh one is signed (an upstream refuses an iat in the future). */
  issuedAtMs: number;
  /** From here on a fresh one is signed: the token has used half its lifetime. */
  refreshAtMs: number;
}

/**
 * Signs the gateway assertion for a consumer, at most about once per half lifetime per key id,
 * plan and scopes: the token sent is therefore between 0 and ttl/2 old, so the upstream always
 * gets at least ttl/2 of validity. Bounded (LRU), and a plan or scope change is a different cache
 * entry, so those claims are never stale.
 *
 * Signing is synchronous: node:crypto's HMAC-SHA256 over the JWS compact form (RFC 7515 §7.1), a
 * few µs. jose's SignJWT goes through WebCrypto, an async job of 50-100 µs, and with thousands of
 * consumers each signed every ttl/2 (10,000 keys at ttl 60 s: 333 a second) that was 6 µs of
 * every request's CPU. jose stays the verifier (src/backend/verify-assertion.ts), and the unit
 * tests check these tokens with its jwtVerify.
 */
export class AssertionSigner {
  private readonly cache: LRUCache<string, CachedToken>;
  private readonly key: KeyObject;
  /** The protected header, encoded once: it names only the algorithm, the type and the key. */
  private readonly header: string;
  /** Tokens signed so far (for tests and metrics). */
  signed = 0;

  constructor(
    secret: AssertionSecret,
    private readonly settings: AssertionSettings,
    maxEntries: number,
    private readonly nowMs: () => number = Date.now,
  ) {
    this.cache = new LRUCache({ max: maxEntries });
    this.key = createSecretKey(secret.bytes);
    this.header = base64url(JSON.stringify({ alg: ASSERTION_ALG, typ: 'JWT', kid: secret.kid }));
  }

  /** A cached token still inside its reuse window; else undefined. */
  cached(keyId: string, plan: string, scopes?: readonly string[]): string | undefined {
    return this.hit(cacheKey(keyId, plan, scopes));
  }

  /**
   * The cached token, or a freshly signed one. `scopes`, when the consumer holds any, go in the
   * `scope` claim (space-separated, RFC 8693 §4.2).
   */
  token(keyId: string, plan: string, scopes?: readonly string[]): string {
    const claims = scopes?.length ? { plan, scope: scopes.join(' ') } : { plan };
    return this.cachedOrSigned(cacheKey(keyId, plan, scopes), claims, keyId);
  }

  /**
   * The marker of a caller without a credential: `anonymous: true` and no subject, no plan, no
   * scope, so the upstream can tell that the gateway admitted the request and that nobody is
   * asserted. One token serves every anonymous request.
   */
  anonymousToken(): string {
    return this.cachedOrSigned(ANONYMOUS, { anonymous: true });
  }

  private hit(id: string): string | undefined {
    const entry = this.cache.get(id);
    if (!entry) return undefined;
    const now = this.nowMs();
    return now < entry.refreshAtMs && now >= entry.issuedAtMs ? entry.token : undefined;
  }

  private cachedOrSigned(id: string, claims: Record<string, unknown>, subject?: string): string {
    return this.hit(id) ?? this.sign(id, claims, subject);
  }

  private sign(id: string, claims: Record<string, unknown>, subject?: string): string {
    const issuedAtSeconds = Math.floor(this.nowMs() / 1000);
    const { ttlSeconds, issuer, audience } = this.settings;
    const payload = {
      ...claims,
      iss: issuer,
      aud: audience,
      iat: issuedAtSeconds,
      exp: issuedAtSeconds + ttlSeconds,
      ...(subject !== undefined && { sub: subject }),
    };
    const signingInput = `${this.header}.${base64url(JSON.stringify(payload))}`;
    const token = `${signingInput}.${createHmac('sha256', this.key).update(signingInput).digest('base64url')}`;
    this.signed++;
    this.cache.set(id, { token, issuedAtMs: issuedAtSeconds * 1000, refreshAtMs: (issuedAtSeconds + ttlSeconds / 2) * 1000 });
    return token;
  }
}

const base64url = (text: string): string => Buffer.from(text, 'utf8').toString('base64url');

/** The cache entry of the anonymous marker: no key id is empty, so no consumer's entry starts with a newline. */
const ANONYMOUS = '\nanonymous';

// Key ids, plan names and scopes hold no newline (key format, plans schema, scope.ts), so this is unambiguous.
function cacheKey(keyId: string, plan: string, scopes?: readonly string[]): string {
  return scopes?.length ? `${keyId}\n${plan}\n${scopes.join(' ')}` : `${keyId}\n${plan}`;
}
