import type { IncomingMessage } from 'node:http';
import { errors as joseErrors, jwtVerify, type JWTVerifyGetKey } from 'jose';
import { LRUCache } from 'lru-cache';
import type { webcrypto } from 'node:crypto';
import type { AssertionSettings } from '../config/assertion-schema.js';
import {
  ANONYMOUS_HEADER,
  ASSERTION_ALG,
  ASSERTION_HEADER,
  CONSUMER_ID_HEADER,
  CONSUMER_PLAN_HEADER,
  importAssertionKey,
} from '../identity/assertion.js';
import type { AssertionSecrets } from '../identity/assertion-secrets.js';
import { limitedWarn } from '../observability/limited-warn.js';
import type { Logger } from '../observability/log.js';
import type { VerifyRequest } from './request-handler.js';

export interface VerifierOptions {
  secrets: AssertionSecrets;
  settings: AssertionSettings;
  logger: Logger;
  nowMs?: () => number;
  /** Verified tokens remembered until they expire (the gateway reuses each for ttl/2). */
  maxCachedTokens?: number;
}

/** A consumer's claims, or the anonymous marker's (no subject, no plan). */
type Verified = ({ anonymous: false; sub: string; plan: string } | { anonymous: true }) & { expiresAtMs: number };

/**
 * The backend trusts only requests that carry a valid gateway assertion: an HS256 JWT signed with
 * a secret it holds (by `kid`: the current one or, during a rotation, the previous one), with the
 * configured issuer and audience, not expired (allowing `clockToleranceSeconds` of skew), not
 * older than `ttlSeconds`, and whose `sub` and `plan` are the X-Tollgate-Consumer-Id and
 * X-Tollgate-Plan the request carries; or the anonymous marker (`anonymous: true`, no `sub`) on a
 * request that carries X-Tollgate-Anonymous and no consumer headers. Other claims (`scope`) are
 * the upstream's to read. Anything else is 401 invalid_gateway_assertion.
 *
 * A verified token is remembered until it expires: the gateway sends the same token for half its
 * lifetime, and an identical string cannot carry a different signature, so only expiry and the
 * headers need checking again.
 */
export function assertionVerifier(opts: VerifierOptions): VerifyRequest {
  const { secrets, settings, logger } = opts;
  const nowMs = opts.nowMs ?? Date.now;
  const toleranceMs = settings.clockToleranceSeconds * 1000;
  const keys = new Map<string, Promise<webcrypto.CryptoKey>>();
  for (const secret of [secrets.current, secrets.previous]) {
    if (secret && !keys.has(secret.kid)) keys.set(secret.kid, importAssertionKey(secret));
  }
  const keyFor: JWTVerifyGetKey = (header) => {
    const key = header.kid === undefined ? undefined : keys.get(header.kid);
    if (!key) throw new joseErrors.JWKSNoMatchingKey('no secret with this kid (signed with another secret?)');
    return key;
  };
  const verified = new LRUCache<string, Verified>({ max: opts.maxCachedTokens ?? 10_000 });

  const warnRefused = limitedWarn(logger, 'request refused: no valid gateway assertion');
  const refuse = (reason: string) => {
    warnRefused({ reason });
    return 'invalid_gateway_assertion' as const;
  };

  return async (req: IncomingMessage) => {
    const token = req.headers[ASSERTION_HEADER];
    if (typeof token !== 'string' || token === '') return refuse(`no ${ASSERTION_HEADER} header`);
    let claims = verified.get(token);
    if (claims && nowMs() >= claims.expiresAtMs + toleranceMs) {
      verified.delete(token);
      return refuse('assertion expired');
    }
    if (!claims) {
      try {
        const { payload } = await jwtVerify(token, keyFor, {
          algorithms: [ASSERTION_ALG],
          issuer: settings.issuer,
          audience: settings.audience,
          clockTolerance: settings.clockToleranceSeconds,
          maxTokenAge: settings.ttlSeconds,
          requiredClaims: ['iat', 'exp'],
          currentDate: new Date(nowMs()),
        });
        const expiresAtMs = payload.exp! * 1000;
        if (payload.anonymous === true) {
          if (payload.sub !== undefined) return refuse('an anonymous assertion names a subject');
          claims = { anonymous: true, expiresAtMs };
        } else {
          if (typeof payload.sub !== 'string') return refuse('assertion has no sub claim');
          if (typeof payload.plan !== 'string') return refuse('assertion has no plan claim');
          claims = { anonymous: false, sub: payload.sub, plan: payload.plan, expiresAtMs };
        }
        verified.set(token, claims);
      } catch (err) {
        const { code, message } = err as { code?: string; message?: string };
        return refuse(code ? `${code}: ${message}` : String(err));
      }
    }
    if (claims.anonymous) {
      if (req.headers[ANONYMOUS_HEADER] !== 'true') return refuse(`an anonymous assertion without ${ANONYMOUS_HEADER}: true`);
      if (req.headers[CONSUMER_ID_HEADER] !== undefined || req.headers[CONSUMER_PLAN_HEADER] !== undefined)
        return refuse('an anonymous assertion with consumer headers');
      return null;
    }
    if (req.headers[ANONYMOUS_HEADER] !== undefined) return refuse(`${ANONYMOUS_HEADER} with a consumer's assertion`);
    if (req.headers[CONSUMER_ID_HEADER] !== claims.sub) return refuse(`${CONSUMER_ID_HEADER} does not match the assertion's sub`);
    if (req.headers[CONSUMER_PLAN_HEADER] !== claims.plan) return refuse(`${CONSUMER_PLAN_HEADER} does not match the assertion's plan`);
    return null;
  };
}
