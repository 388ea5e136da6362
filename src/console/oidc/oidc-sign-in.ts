import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ConsoleOidcConfig } from '../../config/console-schema.js';
import { sendError, sendJson } from '../../errors/render.js';
import type { Logger } from '../../observability/log.js';
import { cookie, cookieValue } from '../cookies.js';
import { ConsoleSessions, RANDOM_ID, sameSecret, sessionCookie, sessionIdOf } from '../sessions.js';
import { consolePrincipal } from './console-principal.js';
import { OidcClient, ProviderUnavailable, SignInRefused } from './oidc-client.js';
import { PENDING_MS, PendingSignIns } from './pending-sign-ins.js';
import { consoleReturnPath } from './return-path.js';

const STATE_COOKIE = 'tg_oidc_state';
const STATE_PATH = '/admin/console/oidc';

export interface OidcSignInParts {
  sessions: ConsoleSessions;
  config(): ConsoleOidcConfig | undefined;
  logger: Logger;
}

/**
 * Sign-in with the team's OpenID provider (authorization code flow with PKCE), under
 * /admin/console/oidc: GET answers whether it is on; /start sends the browser to the provider;
 * /callback takes it back, and on success starts a console session (a new id: any session the
 * browser had is ended first) with the role the ID token's claims map to, then sends it to the
 * console path it started from.
 *
 * The state travels two ways that must agree: in the provider's redirect, and in a cookie set at
 * the start. That cookie is SameSite=Lax: the provider's redirect back is a cross-site top-level
 * GET, which carries Lax cookies and never Strict ones. The session cookie itself stays Strict:
 * set on the callback's answer, it is sent from the console's own page that the browser goes on
 * to. A state is used once; the nonce ties the ID token to this sign-in; the return path is the
 * one checked at the start, kept here, never read from the callback.
 */
export function oidcSignIn({ sessions, config, logger }: OidcSignInParts) {
  const pending = new PendingSignIns();
  let client: OidcClient | undefined;
  const clientFor = (settings: ConsoleOidcConfig) => (client?.config === settings ? client : (client = new OidcClient(settings)));

  const refuse = (res: ServerResponse, cause: string) => {
    logger.warn({ cause }, 'console sign-in refused');
    return sendError(res, 'sign_in_failed');
  };

  async function start(req: IncomingMessage, res: ServerResponse, settings: ConsoleOidcConfig, query: URLSearchParams): Promise<void> {
    const returnTo = consoleReturnPath(query.get('return') ?? undefined);
    if (returnTo === null) return sendError(res, 'invalid_query', 'return must be a path of the console (/admin/console/…).');
    const sign = pending.start(returnTo);
    const location = await clientFor(settings).authorizationUrl(sign);
    res.setHeader('set-cookie', cookie(req, STATE_COOKIE, sign.state, PENDING_MS / 1000, 'Lax', STATE_PATH));
    res.writeHead(302, { location });
    res.end();
  }

  async function callback(req: IncomingMessage, res: ServerResponse, settings: ConsoleOidcConfig, query: URLSearchParams): Promise<void> {
    const clearState = cookie(req, STATE_COOKIE, '', 0, 'Lax', STATE_PATH);
    res.setHeader('set-cookie', clearState);
    const state = query.get('state') ?? '';
    const bound = cookieValue(req.headers.cookie, STATE_COOKIE, RANDOM_ID);
    if (!RANDOM_ID.test(state) || bound === undefined || !sameSecret(state, bound))
      return refuse(res, 'the state is not the one this browser started with');
    const sign = pending.take(state);
    if (!sign) return refuse(res, 'the state is unknown, used already or too old');
    const error = query.get('error');
    if (error !== null) return refuse(res, `the provider answered ${/^[a-z_]{1,40}$/.test(error) ? error : 'an error'}`);
    const code = query.get('code') ?? '';
    if (code === '' || code.length > 2048) return refuse(res, 'no code');
    const claims = await clientFor(settings).signIn(code, sign.verifier, sign.nonce);
    const principal = consolePrincipal(claims, settings);
    if (!principal) {
      logger.warn({ actor: claims.sub }, 'console sign-in refused: no role in the ID token');
      return sendError(res, 'no_console_role');
    }
    sessions.end(sessionIdOf(req.headers.cookie));
    const created = sessions.create(principal, (claims.exp ?? 0) * 1000);
    res.setHeader('set-cookie', [clearState, sessionCookie(req, created.id, created.session)]);
    logger.info({ actor: principal.actor, role: principal.role, via: 'oidc' }, 'console sign-in');
    res.writeHead(302, { location: sign.returnTo });
    res.end();
  }

  return {
    async handle(req: IncomingMessage, res: ServerResponse, subpath: string): Promise<void> {
      const settings = config();
      if (!settings) return sendError(res, 'not_found');
      if (req.method !== 'GET') return sendError(res, 'method_not_allowed', undefined, { allow: 'GET' });
      res.setHeader('cache-control', 'no-store');
      const query = new URL(req.url ?? '/', 'http://console').searchParams;
      try {
        if (subpath === '/oidc') return sendJson(res, 200, { issuer: settings.issuer });
        if (subpath === '/oidc/start') return await start(req, res, settings, query);
        if (subpath === '/oidc/callback') return await callback(req, res, settings, query);
        return sendError(res, 'not_found');
      } catch (err) {
        if (err instanceof SignInRefused) return refuse(res, err.message);
        if (!(err instanceof ProviderUnavailable)) throw err;
        logger.error({ cause: err.message, issuer: settings.issuer }, 'console sign-in: the identity provider is unavailable');
        return sendError(res, 'sign_in_provider_unavailable');
      }
    },
  };
}
