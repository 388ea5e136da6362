import { hash } from 'node:crypto';
import { decodeJwt, decodeProtectedHeader, errors, jwtVerify, type JWTPayload, type ProtectedHeaderParameters } from 'jose';
import { LRUCache } from 'lru-cache';
import type { JwtIssuerSettings, JwtSettings } from '../../config/jwt-schema.js';
import type { Logger } from '../../observability/log.js';
import { jwtConsumerId, type Consumer } from '../consumer.js';
import { discoverJwksUri } from './discovery.js';
import { JwksCache, type KeyResolver } from './jwks-cache.js';
import { tokenScopes } from './token-scopes.js';

/** Longest token verified; anything longer is refused before any decoding (RFC 6750 tokens are small). */
export const MAX_TOKEN_BYTES = 8 * 1024;

/**
 * What became of a token: a consumer (and whether the issuer wants the token forwarded), a refusal
 * whose `description` is a fixed sentence (RFC 6750 error_description, never the token or its
 * claims), or no key set to judge it with (the IdP's fault, not the client's: 503).
 */
export type JwtOutcome =
  | { consumer: Consumer; forwardToken: boolean; validUntilMs: number }
  | { invalid: string }
  | { unavailable: true; retryAfterSeconds: number };

interface Issuer {
  settings: JwtIssuerSettings;
  jwks: JwksCache;
}

interface Verified {
  consumer: Consumer;
  forwardToken: boolean;
  /** The token's exp: past it, the token is verified again (and refused once past the skew too). */
  expiresAtMs: number;
  /** exp plus the issuer's clock skew: the last moment the token is admitted. */
  validUntilMs: number;
}

const invalid = (description: string): JwtOutcome => ({ invalid: description });

/** Headers that tell the verifier where to find a key: a token must never choose its own key. */
const KEY_LOCATING_HEADERS = ['jku', 'x5u', 'jwk', 'x5c'] as const;

/**
 * Verifies JWT access tokens of the configured issuers with jose and turns each into a consumer
 * `jwt:<issuer name>:<subject>` on the mapped plan, with the scopes it grants. Admitted only: a compact JWS (a JWE is
 * refused), at most 8 KiB, from a configured `iss`, with an `alg` the issuer allows (never HMAC or
 * `none`: the schema refuses them) that matches the type of the key its kid names in the issuer's
 * JWKS, no key-locating or critical headers, `aud` one of the issuer's audiences, `exp` present
 * and, with `nbf`, holding within the clock skew. A verified token is remembered until its `exp`
 * (keyed by its SHA-256, bounded), so repeat calls cost a hash and a map lookup.
 */
export class JwtAuthenticator {
  private readonly byIssuer = new Map<string, Issuer>();
  private readonly verified: LRUCache<string, Verified>;
  private readonly now: () => number;

  constructor(
    readonly settings: JwtSettings,
    logger: Logger,
    options: { maxCachedTokens?: number; now?: () => number; previous?: JwtAuthenticator } = {},
  ) {
    this.now = options.now ?? Date.now;
    this.verified = new LRUCache({ max: options.maxCachedTokens ?? 100_000 });
    for (const issuer of settings.issuers) {
      // A reload that leaves an issuer's key source as it was keeps its cached key set.
      const kept = options.previous?.reusableKeys(issuer);
      const jwks =
        kept ??
        new JwksCache({
          issuerName: issuer.name,
          logger,
          now: this.now,
          jwksUri: issuer.jwksUri ? () => Promise.resolve(issuer.jwksUri!) : memoizedDiscovery(issuer.issuer),
        });
      this.byIssuer.set(issuer.issuer, { settings: issuer, jwks });
    }
  }

  private reusableKeys(next: JwtIssuerSettings): JwksCache | undefined {
    const held = this.byIssuer.get(next.issuer);
    if (!held || held.settings.jwksUri !== next.jwksUri || held.settings.discovery !== next.discovery) return undefined;
    return held.jwks;
  }

  verify(token: string): JwtOutcome | Promise<JwtOutcome> {
    if (token.length > MAX_TOKEN_BYTES) return invalid('The token is larger than 8 KiB.');
    const digest = hash('sha256', token, 'base64url');
    const known = this.verified.get(digest);
    if (known && this.now() < known.expiresAtMs)
      return { consumer: known.consumer, forwardToken: known.forwardToken, validUntilMs: known.validUntilMs };
    const segments = countDots(token) + 1;
    if (segments === 5) return invalid('Encrypted tokens (JWE) are not accepted; send a signed JWT.');
    if (segments !== 3) return invalid('The token is not a compact JWS.');
    let header: ProtectedHeaderParameters;
    let claims: JWTPayload;
    try {
      header = decodeProtectedHeader(token);
      claims = decodeJwt(token);
    } catch {
      return invalid('The token is malformed.');
    }
    if (KEY_LOCATING_HEADERS.some((name) => name in header))
      return invalid('Key-locating token headers (jku, x5u, jwk, x5c) are not accepted.');
    // No extension header is understood here, so any `crit` list names one we cannot honour (RFC 7515 §4.1.11).
    if ('crit' in header) return invalid('The token names critical header extensions that are not supported.');
    const issuer = typeof claims.iss === 'string' ? this.byIssuer.get(claims.iss) : undefined;
    if (!issuer) return invalid('The token is not from an accepted issuer.');
    if (typeof header.alg !== 'string' || !issuer.settings.algorithms.includes(header.alg)) {
      return invalid('The token is signed with an algorithm that is not accepted.');
    }
    const keys = issuer.jwks.resolver();
    if (keys instanceof Promise) return keys.then((resolved) => this.withKeys(token, digest, issuer, resolved));
    return this.withKeys(token, digest, issuer, keys);
  }

  private async withKeys(token: string, digest: string, issuer: Issuer, keys: KeyResolver | undefined): Promise<JwtOutcome> {
    if (!keys) return { unavailable: true, retryAfterSeconds: issuer.jwks.retryAfterSeconds() };
    let result = await this.check(token, issuer, keys);
    if (result === 'unknown_kid') {
      // Perhaps the IdP rotated its keys: one refetch per 30 s per issuer (jwks-cache.ts).
      const refreshed = issuer.jwks.refetchForUnknownKid();
      const next = refreshed && (await refreshed);
      result = next ? await this.check(token, issuer, next) : 'unknown_kid';
      if (result === 'unknown_kid') return invalid('No key of the issuer matches the token.');
    }
    if ('invalid' in result) return result;
    const { payload } = result;
    const subject = payload[issuer.settings.subject];
    if (typeof subject !== 'string' || subject === '' || subject.length > 1024) return invalid('The token names no subject.');
    const scopes = tokenScopes(payload);
    const consumer: Consumer = Object.freeze({
      id: jwtConsumerId(issuer.settings.name, subject),
      plan: planOf(issuer.settings.plan, payload),
      ...(scopes && { scopes }),
      claims: Object.freeze({ ...payload }),
    });
    const expiresAtMs = payload.exp! * 1000;
    const validUntilMs = expiresAtMs + issuer.settings.clockSkewSeconds * 1000;
    this.verified.set(digest, { consumer, forwardToken: issuer.settings.forwardToken, expiresAtMs, validUntilMs });
    return { consumer, forwardToken: issuer.settings.forwardToken, validUntilMs };
  }

  private async check(
    token: string,
    issuer: Issuer,
    keys: KeyResolver,
  ): Promise<{ payload: JWTPayload } | { invalid: string } | 'unknown_kid'> {
    const s = issuer.settings;
    try {
      const { payload } = await jwtVerify(token, keys, {
        issuer: s.issuer,
        audience: s.audiences,
        algorithms: s.algorithms,
        clockTolerance: s.clockSkewSeconds,
        requiredClaims: ['exp'],
        currentDate: new Date(this.now()),
      });
      return { payload };
    } catch (err) {
      if (err instanceof errors.JWKSNoMatchingKey) return 'unknown_kid';
      return { invalid: describe(err) };
    }
  }
}

/** The plan a token is on: its plan claim through the map; a missing or unmapped value gets the default. */
function planOf(plan: JwtIssuerSettings['plan'], payload: JWTPayload): string {
  if (plan.claim === undefined) return plan.default;
  const value = payload[plan.claim];
  // A token never names a plan directly: only the operator's map turns a claim value into one.
  if (typeof value === 'string' && Object.hasOwn(plan.map, value)) return plan.map[value]!;
  return plan.default;
}

/** A fixed sentence per failure (RFC 6750 error_description: no quotes, nothing from the token). */
function describe(err: unknown): string {
  if (err instanceof errors.JWTExpired) return 'The token has expired.';
  if (err instanceof errors.JWTClaimValidationFailed) {
    switch (err.claim) {
      case 'iss':
        return 'The token is not from an accepted issuer.';
      case 'aud':
        return 'The token is not meant for this API (audience).';
      case 'nbf':
        return 'The token is not valid yet.';
      case 'exp':
        return 'The token has no valid expiry.';
      default:
        return 'A token claim is invalid.';
    }
  }
  if (err instanceof errors.JWSSignatureVerificationFailed) return 'The token signature is invalid.';
  if (err instanceof errors.JOSEAlgNotAllowed) return 'The token is signed with an algorithm that is not accepted.';
  if (err instanceof errors.JWKSMultipleMatchingKeys) return 'The token matches more than one key of the issuer; send a kid.';
  if (err instanceof errors.JOSENotSupported) return 'The token uses a feature that is not supported.';
  return 'The token is malformed.';
}

function countDots(token: string): number {
  let dots = 0;
  for (let i = 0; i < token.length; i++) if (token.charCodeAt(i) === 46) dots++;
  return dots;
}

/** The discovered jwks_uri, read once; a failed read is tried again on the next fetch. */
function memoizedDiscovery(issuer: string): () => Promise<string> {
  let found: Promise<string> | undefined;
  return () => {
    found ??= discoverJwksUri(issuer).catch((err: unknown) => {
      found = undefined;
      throw err;
    });
    return found;
  };
}
