import { readBounded } from '../../http/read-bounded.js';
import { createLocalJWKSet, type JSONWebKeySet } from 'jose';
import type { Logger } from '../../observability/log.js';

/** A key set as jose resolves it: by the token's header (kid, alg → key type). */
export type KeyResolver = ReturnType<typeof createLocalJWKSet>;

export interface JwksCacheOptions {
  /** Where the keys are; a promise when it is read from a discovery document first. */
  jwksUri: () => Promise<string>;
  logger: Logger;
  /** The issuer's name, for logs. */
  issuerName: string;
  now?: () => number;
  fetchTimeoutMs?: number;
}

// Freshness comes from the IdP's Cache-Control, kept within bounds: an IdP saying `no-store`
// must not make every request a fetch, nor one saying a year keep a removed key alive that long.
export const MIN_FRESH_MS = 5 * 60_000;
export const MAX_FRESH_MS = 24 * 3_600_000;
/** While the IdP cannot be reached, the last good set keeps serving this long past its freshness. */
export const STALE_IF_ERROR_MS = 6 * 3_600_000;
/** A token naming an unknown kid refetches at most this often per issuer (rotation, not floods). */
export const UNKNOWN_KID_REFETCH_MS = 30_000;
/** After a failed fetch, none again for this long: with no set, requests get 503 meanwhile. */
export const FAILED_FETCH_BACKOFF_MS = 5_000;
const MAX_JWKS_BYTES = 512 * 1024;

interface Held {
  resolver: KeyResolver;
  freshUntilMs: number;
}

/**
 * One issuer's JSON Web Key Set: fetched on first use, kept as long as the IdP's Cache-Control
 * says (bounded), refetched early at most once per 30 s when a token names a kid it does not hold,
 * and served stale (bounded) while the IdP is unreachable. Concurrent fetches share one request.
 * jose does the key handling (createLocalJWKSet: kid and alg select a key of the matching type).
 */
export class JwksCache {
  private held: Held | undefined;
  private pending: Promise<void> | undefined;
  private lastAttemptMs = -Infinity;
  private lastFailureMs = -Infinity;
  private readonly now: () => number;

  constructor(private readonly options: JwksCacheOptions) {
    this.now = options.now ?? Date.now;
  }

  /**
   * The key set to verify with now: undefined when there has never been one (or the last good one
   * is past its stale bound) and the IdP cannot give one.
   */
  resolver(): KeyResolver | undefined | Promise<KeyResolver | undefined> {
    const nowMs = this.now();
    const held = this.held;
    if (held && nowMs < held.freshUntilMs) return held.resolver;
    if (held && nowMs < held.freshUntilMs + STALE_IF_ERROR_MS) {
      // Stale: serve it, and refresh behind the request (stale-while-revalidate).
      if (this.mayFetch(nowMs)) void this.refresh();
      return held.resolver;
    }
    if (!this.mayFetch(nowMs)) return undefined;
    return this.refresh().then(() => this.usable());
  }

  /** The held set, unless it is past its stale bound (a refresh just failed). */
  private usable(): KeyResolver | undefined {
    const held = this.held;
    return held && this.now() < held.freshUntilMs + STALE_IF_ERROR_MS ? held.resolver : undefined;
  }

  /**
   * A token named a kid the set lacks: perhaps the IdP rotated. Refetches unless one was tried in
   * the last 30 s; resolves to the set to try once more, or undefined when nothing new was fetched.
   */
  refetchForUnknownKid(): Promise<KeyResolver | undefined> | undefined {
    const nowMs = this.now();
    if (this.pending) return this.pending.then(() => this.usable());
    if (nowMs - this.lastAttemptMs < UNKNOWN_KID_REFETCH_MS) return undefined;
    return this.refresh().then(() => this.usable());
  }

  /** Seconds a client should wait before trying again while no key set is held. */
  retryAfterSeconds(): number {
    const waitMs = this.lastFailureMs + FAILED_FETCH_BACKOFF_MS - this.now();
    return Math.max(1, Math.ceil(waitMs / 1000));
  }

  private mayFetch(nowMs: number): boolean {
    return this.pending !== undefined || nowMs - this.lastFailureMs >= FAILED_FETCH_BACKOFF_MS;
  }

  private refresh(): Promise<void> {
    if (this.pending) return this.pending;
    this.lastAttemptMs = this.now();
    this.pending = this.fetchSet()
      .then(
        ({ jwks, maxAgeMs }) => {
          const fetchedAtMs = this.now();
          const freshMs = Math.min(MAX_FRESH_MS, Math.max(MIN_FRESH_MS, maxAgeMs ?? MIN_FRESH_MS));
          this.held = { resolver: createLocalJWKSet(jwks), freshUntilMs: fetchedAtMs + freshMs };
          this.options.logger.info(
            { issuer: this.options.issuerName, keys: jwks.keys.length, freshSeconds: freshMs / 1000 },
            'jwks fetched',
          );
        },
        (err: unknown) => {
          this.lastFailureMs = this.now();
          this.options.logger.warn(
            { issuer: this.options.issuerName, reason: err instanceof Error ? err.message : String(err), holding: this.held !== undefined },
            'jwks fetch failed',
          );
        },
      )
      .finally(() => (this.pending = undefined));
    return this.pending;
  }

  private async fetchSet(): Promise<{ jwks: JSONWebKeySet; maxAgeMs: number | undefined }> {
    const url = await this.options.jwksUri();
    const res = await fetch(url, {
      headers: { accept: 'application/jwk-set+json, application/json' },
      redirect: 'error',
      signal: AbortSignal.timeout(this.options.fetchTimeoutMs ?? 5000),
    });
    if (res.status !== 200) {
      await res.body?.cancel();
      throw new Error(`JWKS answered ${res.status}`);
    }
    const jwks = parseJwks(await readBounded(res, MAX_JWKS_BYTES));
    return { jwks, maxAgeMs: maxAgeMsOf(res.headers.get('cache-control')) };
  }
}

function parseJwks(text: string): JSONWebKeySet {
  const value: unknown = JSON.parse(text);
  if (typeof value !== 'object' || value === null || !Array.isArray((value as { keys?: unknown }).keys)) {
    throw new Error('JWKS is not an object with a "keys" array');
  }
  return value as JSONWebKeySet;
}

/** `max-age` (RFC 9111 §5.2.2.1) in ms; 0 for no-store / no-cache; undefined when absent. */
export function maxAgeMsOf(cacheControl: string | null): number | undefined {
  if (!cacheControl) return undefined;
  if (/(^|,)\s*(no-store|no-cache)\b/i.test(cacheControl)) return 0;
  const match = /(?:^|,)\s*max-age\s*=\s*"?(\d{1,10})"?/i.exec(cacheControl);
  return match ? Number(match[1]) * 1000 : undefined;
}
