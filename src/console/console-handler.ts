import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ErrorCode } from '../errors/registry.js';
import { sendError, sendJson } from '../errors/render.js';
import { readJsonBody } from '../http/read-json-body.js';
import type { Logger } from '../observability/log.js';
import type { ConsoleOidcConfig } from '../config/console-schema.js';
import { cookie } from './cookies.js';
import { oidcSignIn } from './oidc/oidc-sign-in.js';
import {
  ConsoleSessions,
  SESSION_COOKIE,
  sameOrigin,
  sessionCookie,
  sessionIdOf,
  type Session,
  type SessionPrincipal,
} from './sessions.js';

export const CONSOLE_BASE = '/admin/console';
/** The page's files, at the package root (console/), shipped in the npm package and the image. */
export const CONSOLE_ASSETS_DIR = fileURLToPath(new URL('../../console/', import.meta.url));

/**
 * Every console answer: scripts and styles only from this origin (no inline script or style, so
 * an injected string cannot run), no framing (clickjacking), no sniffing, no referrer.
 */
const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
};

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

interface Asset {
  body: Buffer;
  type: string;
  etag: string;
}

export interface ConsoleParts {
  sessions: ConsoleSessions;
  /** The admin token of the sign-in form → its holder, under the admin API's failure limit. */
  signIn(
    req: IncomingMessage,
    token: string,
  ): Promise<{ principal: SessionPrincipal } | { code: ErrorCode; message?: string; headers: Record<string, string | number> }>;
  /** What the principal may do (admin/access/roles.ts): the page shows only that. */
  actionsOf(principal: SessionPrincipal): string[];
  /** The OpenID sign-in's settings in force (gateway.yaml `console.oidc`); undefined: tokens only. */
  oidc?(): ConsoleOidcConfig | undefined;
  logger: Logger;
  assetsDir?: string;
}

export function isConsolePath(path: string): boolean {
  return path === CONSOLE_BASE || path.startsWith(`${CONSOLE_BASE}/`);
}

/**
 * The operator console under /admin/console: its static files (read once, at start) and its
 * session: POST /admin/console/session exchanges an admin token for an HttpOnly, SameSite=Strict
 * cookie and a CSRF token; GET tells the page who is signed in (and the CSRF token again, after a
 * reload); DELETE signs out. Everything else the page does goes through the admin API.
 */
export function createConsole({ sessions, signIn, actionsOf, oidc, logger, assetsDir = CONSOLE_ASSETS_DIR }: ConsoleParts) {
  const view = (session: Session) => sessionView(session, actionsOf(session.principal));
  const openId = oidc && oidcSignIn({ sessions, config: oidc, logger });
  const assets = loadAssets(assetsDir);

  async function session(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const id = sessionIdOf(req.headers.cookie);
    if (req.method === 'GET') {
      const live = sessions.touch(id);
      if (!live) return sendError(res, 'missing_admin_token', 'Not signed in.', { 'www-authenticate': 'Bearer realm="tollgate-admin"' });
      return sendJson(res, 200, view(live));
    }
    if (req.method === 'POST') {
      if (!sameOrigin(req)) return sendError(res, 'invalid_csrf_token', 'The request comes from another origin than the console.');
      const body = await readJsonBody(req, 4096, res);
      if (!body.ok) return sendError(res, body.code, body.message);
      const token = (body.value as { token?: unknown } | null)?.token;
      if (typeof token !== 'string' || Object.keys(body.value as object).length !== 1)
        return sendError(res, 'invalid_body', 'The body must be {"token": "<admin token>"}.');
      const result = await signIn(req, token);
      if ('code' in result) return sendError(res, result.code, result.message, result.headers);
      sessions.end(id);
      const created = sessions.create(result.principal);
      res.setHeader('set-cookie', sessionCookie(req, created.id, created.session));
      logger.info({ actor: result.principal.actor, role: result.principal.role }, 'console sign-in');
      return sendJson(res, 201, view(created.session));
    }
    if (req.method === 'DELETE') {
      const check = sessions.check(req);
      if (!('principal' in check) && (check.refused === 'csrf' || check.refused === 'cross_origin'))
        return sendError(res, 'invalid_csrf_token');
      sessions.end(id);
      res.setHeader('set-cookie', cookie(req, SESSION_COOKIE, '', 0));
      if ('principal' in check) logger.info({ actor: check.principal.actor }, 'console sign-out');
      res.statusCode = 204;
      return void res.end();
    }
    sendError(res, 'method_not_allowed', undefined, { allow: 'GET, POST, DELETE' });
  }

  return {
    async handle(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
      for (const name in SECURITY_HEADERS) res.setHeader(name, SECURITY_HEADERS[name]!);
      const subpath = path.slice(CONSOLE_BASE.length) || '/';
      if (subpath === '/session') return session(req, res);
      if (subpath === '/oidc' || subpath.startsWith('/oidc/'))
        return openId ? openId.handle(req, res, subpath) : sendError(res, 'not_found');
      const asset = assets.get(subpath === '/' ? '/index.html' : subpath);
      if (!asset) return sendError(res, 'not_found');
      if (req.method !== 'GET' && req.method !== 'HEAD') return sendError(res, 'method_not_allowed', undefined, { allow: 'GET, HEAD' });
      res.setHeader('content-type', asset.type);
      res.setHeader('etag', asset.etag);
      // Revalidated on each load: a new version of tollgate serves its own page at once.
      res.setHeader('cache-control', 'no-cache');
      if (req.headers['if-none-match'] === asset.etag) {
        res.statusCode = 304;
        return void res.end();
      }
      res.setHeader('content-length', asset.body.length);
      res.end(req.method === 'HEAD' ? undefined : asset.body);
    },
  };
}

function sessionView(session: Session, actions: string[]) {
  const { actor, role, owner, email } = session.principal;
  return {
    actor,
    role,
    owner: owner ?? null,
    email: email ?? null,
    actions,
    csrf: session.csrf,
    expiresAt: new Date(session.expiresAtMs).toISOString(),
  };
}

function loadAssets(dir: string): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  for (const name of readdirSync(dir)) {
    const type = TYPES[name.slice(name.lastIndexOf('.'))];
    if (!type) continue;
    const body = readFileSync(join(dir, name));
    assets.set(`/${name}`, { body, type, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"` });
  }
  return assets;
}
