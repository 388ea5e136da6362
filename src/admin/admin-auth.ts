import type { IncomingMessage } from 'node:http';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import type { ErrorCode } from '../errors/registry.js';
import { clientAddressOf } from '../http/client-address.js';
import type { Logger } from '../observability/log.js';
import type { AdminTokens } from './admin-tokens.js';

export type AdminAuthResult = { actor: string } | { code: ErrorCode; headers: Record<string, string | number> };

const BEARER = /^[ \t]*bearer[ \t]+([^ \t]+)[ \t]*$/i;
const CHALLENGE = 'Bearer realm="tollgate-admin"';
const WINDOW_SECONDS = 60;

/**
 * `Authorization: Bearer <admin token>` → the token's label (the audit actor). Failures are
 * logged (address and cause, never what was sent) and limited per client address: past
 * `failuresPerMinute` the address gets 429 until the window ends, without its tokens being checked.
 * The limit is per process: the admin listener is reached on one replica at a time, from inside.
 */
export function adminAuthenticator(tokens: AdminTokens, logger: Logger, failuresPerMinute = 10) {
  const failures = new RateLimiterMemory({ points: failuresPerMinute, duration: WINDOW_SECONDS, keyPrefix: 'tg-admin-auth' });

  const refuse = async (address: string, code: ErrorCode): Promise<AdminAuthResult> => {
    logger.warn({ address, code }, 'admin authentication failed');
    try {
      await failures.consume(address);
    } catch (err) {
      if (err instanceof RateLimiterRes) return tooMany(err);
      throw err;
    }
    return { code, headers: { 'www-authenticate': code === 'missing_admin_token' ? CHALLENGE : `${CHALLENGE}, error="invalid_token"` } };
  };

  return async (req: IncomingMessage): Promise<AdminAuthResult> => {
    const address = clientAddressOf(req, 0);
    const state = await failures.get(address);
    if (state && state.consumedPoints >= failuresPerMinute) return tooMany(state);
    const header = req.headers.authorization;
    if (!header) return refuse(address, 'missing_admin_token');
    const token = header.length <= 1024 ? BEARER.exec(header)?.[1] : undefined;
    const actor = token === undefined ? null : tokens.labelOf(token);
    return actor === null ? refuse(address, 'invalid_admin_token') : { actor };
  };
}

function tooMany(state: RateLimiterRes): AdminAuthResult {
  return { code: 'too_many_unauthenticated_requests', headers: { 'retry-after': Math.max(1, Math.ceil(state.msBeforeNext / 1000)) } };
}
