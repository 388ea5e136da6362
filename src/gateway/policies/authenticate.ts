import type { Consumer } from '../../auth/consumer.js';
import type { JwtAuthenticator, JwtOutcome } from '../../auth/jwt/jwt-authenticator.js';
import { MAX_TOKEN_BYTES } from '../../auth/jwt/jwt-authenticator.js';
import { hashApiKey, parseApiKey, sameHash } from '../../keys/format.js';
import type { KeyRecord } from '../../keys/record.js';
import { CONTINUE, reject, type Credential, type Decision, type Policy, type RequestContext } from '../context.js';
import type { KeyCache, KeyLookup } from '../key-cache.js';

// RFC 6750 §3: a 401 names the scheme; `error="invalid_token"` when a token was sent but is bad.
const CHALLENGE = { 'www-authenticate': 'Bearer realm="tollgate"' };
const INVALID_TOKEN = { 'www-authenticate': 'Bearer realm="tollgate", error="invalid_token"' };

// RFC 7235: the scheme is case-insensitive; one token, optional surrounding whitespace.
const BEARER = /^[ \t]*bearer[ \t]+([^ \t]+)[ \t]*$/i;
/** Longer headers are refused before any parsing: no key is that long. */
const MAX_HEADER_LENGTH = 256;
/** With identity providers configured: a JWT up to 8 KiB, and the scheme around it. */
const MAX_JWT_HEADER_LENGTH = MAX_TOKEN_BYTES + 64;

/** RFC 6750 §3: the challenge of a refused token, with a fixed description (never the token). */
export function invalidToken(description: string): Decision {
  return reject('invalid_token', description, {
    'www-authenticate': `Bearer realm="tollgate", error="invalid_token", error_description="${description}"`,
  });
}

/**
 * `Authorization: Bearer <key>` → the key's record, or a 401 whose code tells the cause:
 * missing_api_key, malformed_api_key (not a tollgate key at all; no store lookup),
 * invalid_api_key (well-formed but unknown or wrong secret), revoked_api_key, api_key_expired.
 * Expiry and rotation grace are judged from the record itself (cached, or stale while Redis is
 * down): no store round trip of their own.
 *
 * With identity providers configured (`jwt:` in gateway.yaml), a token with a dot in it (an API
 * key never has one) is a JWT for src/auth/jwt/ instead: the same consumer comes out of either, or
 * 401 invalid_token, or 503 identity_provider_unavailable when the IdP's keys cannot be had.
 *
 * A request with no Authorization header at all, on a route that admits anonymous callers, is the
 * anonymous consumer of its client address (`anonymous`, access.ts). Only the absence of the
 * header does that: an empty, malformed or wrong credential is the 401 it always was.
 */
export function authenticate(
  keys: KeyCache,
  blockedSeconds: (ctx: RequestContext) => number = () => 0,
  jwt: () => JwtAuthenticator | undefined = () => undefined,
  anonymous: (ctx: RequestContext) => Consumer | undefined = () => undefined,
): Policy {
  return (ctx) => {
    const header = ctx.req.headers.authorization;
    if (header === undefined) {
      const consumer = anonymous(ctx);
      if (consumer) {
        ctx.consumer = consumer;
        return CONTINUE;
      }
    }
    if (header === undefined || header === '') return reject('missing_api_key', undefined, CHALLENGE);
    if (countAuthorizationHeaders(ctx) > 1) {
      return reject('malformed_api_key', 'Send exactly one Authorization header.', INVALID_TOKEN);
    }
    const tokens = jwt();
    const match = header.length <= (tokens ? MAX_JWT_HEADER_LENGTH : MAX_HEADER_LENGTH) ? BEARER.exec(header) : null;
    if (!match && tokens && header.length > MAX_JWT_HEADER_LENGTH) {
      return judgeToken(ctx, { invalid: 'The token is larger than 8 KiB.' }, blockedSeconds);
    }
    if (!match) {
      return reject('malformed_api_key', 'Use the Bearer scheme: `Authorization: Bearer <API_KEY>`.', INVALID_TOKEN);
    }
    const token = match[1]!;
    if (tokens && token.includes('.')) {
      const outcome = tokens.verify(token);
      // Usually synchronous: a token seen before is a cache hit until its exp.
      if (!(outcome instanceof Promise)) return judgeToken(ctx, outcome, blockedSeconds, token);
      return outcome.then((o) => judgeToken(ctx, o, blockedSeconds, token));
    }
    const id = parseApiKey(token);
    if (id === null) return reject('malformed_api_key', undefined, INVALID_TOKEN);
    // A fresh record is answered at once; lookup also re-reads a key in use before it expires
    // (key-cache.ts), which a plain cache read would not.
    const lookup = keys.lookup(id);
    if (!(lookup instanceof Promise)) return judge(ctx, token, lookup, blockedSeconds);
    // The lookup reaches the store (or waits on a read already under way for this id).
    const span = ctx.trace?.storeCall('tollgate key lookup', id);
    const waitedFromMs = performance.now();
    return lookup.then((l) => {
      ctx.trace?.endStoreCall(span, { 'tollgate.lookup': 'unavailable' in l ? 'unavailable' : l.found ? 'found' : 'unknown' });
      // The quota decision's wait, if any, shares this one's time on Redis; a read that failed spent it (redis-wait.ts).
      ctx.redisWaitSinceMs = 'readFailed' in l ? -Infinity : waitedFromMs;
      return judge(ctx, token, l, blockedSeconds);
    });
  };
}

/**
 * A valid key is served whatever other requests from its address did: one scanner behind a shared
 * NAT must not lock out its neighbours. Only failures are throttled: while the address is over its
 * failed-authentication limit, a key that does not authenticate gets 429 instead of a 401 telling
 * why, and unknown ids are remembered by the key cache, so repeating one costs no store read.
 */
function judge(ctx: RequestContext, token: string, lookup: KeyLookup, blockedSeconds: (ctx: RequestContext) => number): Decision {
  if ('unavailable' in lookup) return reject('key_store_unavailable', undefined, { 'retry-after': 1 });
  const record = lookup.found;
  const matches = record !== undefined && record !== null && secretMatches(record, hashApiKey(token));
  const expired = matches && record.expiresAt !== undefined && Date.now() >= Date.parse(record.expiresAt);
  if (matches && record.status !== 'revoked' && !expired) {
    ctx.consumer = record;
    ctx.credential = keyCredential(record);
    return CONTINUE;
  }
  const seconds = blockedSeconds(ctx);
  if (seconds > 0) return reject('too_many_unauthenticated_requests', undefined, { 'retry-after': seconds });
  if (!matches) return reject('invalid_api_key', undefined, INVALID_TOKEN);
  if (record.status === 'revoked') return reject('revoked_api_key', undefined, INVALID_TOKEN);
  return reject('api_key_expired', `The API key expired at ${record.expiresAt}.`, INVALID_TOKEN);
}

/** A JWT's outcome as a decision; failures are throttled per address as for keys (see judge). */
function judgeToken(ctx: RequestContext, outcome: JwtOutcome, blockedSeconds: (ctx: RequestContext) => number, token?: string): Decision {
  if ('consumer' in outcome) {
    ctx.consumer = outcome.consumer;
    ctx.credential = { kind: 'token', validUntilMs: outcome.validUntilMs };
    if (outcome.forwardToken) ctx.forwardToken = token;
    return CONTINUE;
  }
  if ('unavailable' in outcome) return reject('identity_provider_unavailable', undefined, { 'retry-after': outcome.retryAfterSeconds });
  const seconds = blockedSeconds(ctx);
  if (seconds > 0) return reject('too_many_unauthenticated_requests', undefined, { 'retry-after': seconds });
  return invalidToken(outcome.invalid);
}

/** An API key as the credential of a request: valid until its expiresAt, if it has one. */
export function keyCredential(record: Pick<KeyRecord, 'expiresAt'>): Credential {
  return { kind: 'key', validUntilMs: record.expiresAt === undefined ? undefined : Date.parse(record.expiresAt) };
}

/** The current secret, or the replaced one until its rotation grace ends (src/keys/lifecycle/rotate-key.ts). */
function secretMatches(record: KeyRecord, hash: string): boolean {
  if (sameHash(hash, record.hash)) return true;
  return (
    record.previousHash !== undefined &&
    record.graceEndsAt !== undefined &&
    Date.now() < Date.parse(record.graceEndsAt) &&
    sameHash(hash, record.previousHash)
  );
}

/** Node keeps only the first Authorization header; the raw list shows whether more were sent. */
function countAuthorizationHeaders(ctx: RequestContext): number {
  const raw = ctx.req.rawHeaders;
  let count = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length === 13 && name.toLowerCase() === 'authorization') count++;
  }
  return count;
}
