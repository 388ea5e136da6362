import type { IncomingMessage } from 'node:http';
import { ProxyTrust } from '../http/proxy-trust.js';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import type { ConsoleSessions } from '../console/sessions.js';
import type { ErrorCode } from '../errors/registry.js';
import { clientAddressOf } from '../http/client-address.js';
import { limitedWarn } from '../observability/limited-warn.js';
import type { Logger } from '../observability/log.js';
import type { Principal } from './access/roles.js';
import type { AdminTokens } from './admin-tokens.js';

export type AdminAuthResult = { principal: Principal } | { code: ErrorCode; message?: string; headers: Record<string, string | number> };

export interface AdminAuthenticator {
  (req: IncomingMessage): Promise<AdminAuthResult>;
  /** The console's sign-in: `token` (from the sign-in form) → its holder, under the same failure limit. */
  signIn(req: IncomingMessage, token: string): Promise<AdminAuthResult>;
}

const BEARER = /^[ \t]*bearer[ \t]+([^ \t]+)[ \t]*$/i;
const CHALLENGE = 'Bearer realm="tollgate-admin"';
const WINDOW_SECONDS = 60;

/**
 * `Authorization: Bearer <admin token>` → the token's holder (label, role, owner). Failures are
 * logged (address and cause, never what was sent) and limited per client address: past
 * `failuresPerMinute` the address gets 429 until the window ends, without its tokens being checked.
 * The limit is per process: the admin listener is reached on one replica at a time, from inside.
 *
 * With `sessions` (the console), a request without Authorization may instead carry a console
 * session cookie: its principal is whoever signed in (token or OpenID), and a change must carry the
 * session's CSRF token (console/sessions.ts). An ended session is refused without counting as a
 * failure (a page left open would otherwise lock its operator out); its id is not guessable.
 */
export function adminAuthenticator(
  tokens: AdminTokens,
  logger: Logger,
  failuresPerMinute = 10,
  sessions?: ConsoleSessions,
): AdminAuthenticator {
  const failures = new RateLimiterMemory({ points: failuresPerMinute, duration: WINDOW_SECONDS, keyPrefix: 'tg-admin-auth' });
  const warnRefused = limitedWarn(logger, 'admin authentication failed');

  const refuse = async (address: string, code: ErrorCode): Promise<AdminAuthResult> => {
    warnRefused({ address, code });
    try {
      await failures.consume(address);
    } catch (err) {
      if (err instanceof RateLimiterRes) return tooMany(err);
      throw err;
    }
    return { code, headers: { 'www-authenticate': code === 'missing_admin_token' ? CHALLENGE : `${CHALLENGE}, error="invalid_token"` } };
  };

  const blocked = async (address: string): Promise<AdminAuthResult | undefined> => {
    const state = await failures.get(address);
    return state && state.consumedPoints >= failuresPerMinute ? tooMany(state) : undefined;
  };

  const viaSession = (req: IncomingMessage, address: string): Promise<AdminAuthResult> | AdminAuthResult => {
    const check = sessions!.check(req);
    if ('principal' in check) return check;
    if (check.refused === 'no_session') return refuse(address, 'missing_admin_token');
    if (check.refused === 'expired')
      return {
        code: 'invalid_admin_token',
        message: 'The console session has ended; sign in again.',
        headers: { 'www-authenticate': CHALLENGE },
      };
    logger.warn({ address, cause: check.refused }, 'console change refused');
    return {
      code: 'invalid_csrf_token',
      message: check.refused === 'csrf' ? undefined : 'The request comes from another origin than the console.',
      headers: {},
    };
  };

  const authenticate = async (req: IncomingMessage): Promise<AdminAuthResult> => {
    const address = clientAddressOf(req, ProxyTrust.none);
    const limited = await blocked(address);
    if (limited) return limited;
    const header = req.headers.authorization;
    if (!header) return sessions && req.headers.cookie ? viaSession(req, address) : refuse(address, 'missing_admin_token');
    const token = header.length <= 1024 ? BEARER.exec(header)?.[1] : undefined;
    const principal = token === undefined ? null : tokens.principalOf(token);
    return principal === null ? refuse(address, 'invalid_admin_token') : { principal };
  };

  return Object.assign(authenticate, {
    async signIn(req: IncomingMessage, token: string): Promise<AdminAuthResult> {
      const address = clientAddressOf(req, ProxyTrust.none);
      const limited = await blocked(address);
      if (limited) return limited;
      const principal = token.length <= 1024 ? tokens.principalOf(token) : null;
      return principal === null ? refuse(address, token ? 'invalid_admin_token' : 'missing_admin_token') : { principal };
    },
  });
}

function tooMany(state: RateLimiterRes): AdminAuthResult {
  return { code: 'too_many_unauthenticated_requests', headers: { 'retry-after': Math.max(1, Math.ceil(state.msBeforeNext / 1000)) } };
}
