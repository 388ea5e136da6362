import { SignJWT } from 'jose';
import { LRUCache } from 'lru-cache';
import type { webcrypto } from 'node:crypto';
import type { AssertionSettings } from '../config/assertion-schema.js';
import { ASSERTION_ALG, importAssertionKey } from '../identity/assertion.js';
import type { AssertionSecret } from '../identity/assertion-secrets.js';

interface CachedToken {
  token: string;
  /** From here on a fresh one is signed: the token has used half its lifetime. */
  refreshAtMs: number;
}

/**
 * Signs the gateway assertion for a consumer, at most about once per half lifetime per key id and
 * plan: an HMAC JWT costs ~100 µs, a cache hit well under 1 µs. The token sent is therefore between
 * 0 and ttl/2 old, so the upstream always gets at least ttl/2 of validity. Bounded (LRU), and a plan
 * change is a different cache entry, so the plan claim is never stale.
 */
export class AssertionSigner {
  private readonly cache: LRUCache<string, CachedToken>;
  private readonly signing = new Map<string, Promise<string>>();
  private readonly key: Promise<webcrypto.CryptoKey>;
  /** Tokens signed so far (for tests and metrics). */
  signed = 0;

  constructor(
    private readonly secret: AssertionSecret,
    private readonly settings: AssertionSettings,
    maxEntries: number,
    private readonly nowMs: () => number = Date.now,
  ) {
    this.cache = new LRUCache({ max: maxEntries });
    this.key = importAssertionKey(secret, 'sign');
  }

  /** A cached token still inside its reuse window, without waiting for anything; else undefined. */
  cached(keyId: string, plan: string): string | undefined {
    const entry = this.cache.get(cacheKey(keyId, plan));
    return entry && this.nowMs() < entry.refreshAtMs ? entry.token : undefined;
  }

  /** The cached token, or a freshly signed one (concurrent requests for one key share a signing). */
  token(keyId: string, plan: string): string | Promise<string> {
    const hit = this.cached(keyId, plan);
    if (hit) return hit;
    const id = cacheKey(keyId, plan);
    let pending = this.signing.get(id);
    if (!pending) {
      pending = this.sign(keyId, plan).finally(() => this.signing.delete(id));
      this.signing.set(id, pending);
    }
    return pending;
  }

  private async sign(keyId: string, plan: string): Promise<string> {
    const issuedAtSeconds = Math.floor(this.nowMs() / 1000);
    const { ttlSeconds, issuer, audience } = this.settings;
    const token = await new SignJWT({ plan })
      .setProtectedHeader({ alg: ASSERTION_ALG, typ: 'JWT', kid: this.secret.kid })
      .setIssuer(issuer)
      .setAudience(audience)
      .setSubject(keyId)
      .setIssuedAt(issuedAtSeconds)
      .setExpirationTime(issuedAtSeconds + ttlSeconds)
      .sign(await this.key);
    this.signed++;
    this.cache.set(cacheKey(keyId, plan), { token, refreshAtMs: (issuedAtSeconds + ttlSeconds / 2) * 1000 });
    return token;
  }
}

// Key ids and plan names hold no newline (key format and plans schema), so this is unambiguous.
function cacheKey(keyId: string, plan: string): string {
  return `${keyId}\n${plan}`;
}
