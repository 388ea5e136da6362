import { once as onceEvent } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';
import type { ConsoleOidcConfig } from '../config/console-schema.js';
import { createConsole, isConsolePath } from '../console/console-handler.js';
import { ConsoleSessions } from '../console/sessions.js';
import { ERRORS } from '../errors/registry.js';
import { sendError, sendJson } from '../errors/render.js';
import { loadOpenApiDocument } from '../gateway/openapi-document.js';
import { readJsonBody } from '../http/read-json-body.js';
import type { Caller } from '../keys/lifecycle/deps.js';
import { LifecycleError } from '../keys/lifecycle/lifecycle-error.js';
import type { Logger } from '../observability/log.js';
import { authorize } from './access/authorize.js';
import { allowedActions } from './access/roles.js';
import { adminAuthenticator } from './admin-auth.js';
import type { AdminDeps, AdminReply, AdminRoute } from './admin-route.js';
import type { AdminTokens } from './admin-tokens.js';
import { auditRoutes } from './routes/audit-routes.js';
import { keysRoutes } from './routes/keys-routes.js';
import { plansRoutes } from './routes/plans-routes.js';
import { servicesRoutes } from './routes/services-routes.js';
import { trafficRoutes } from './routes/traffic-routes.js';
import { usageRoutes } from './routes/usage-routes.js';

export const ADMIN_BASE = '/admin/v1';
/** The admin API's own OpenAPI document, at the package root beside openapi.yaml. */
export const ADMIN_OPENAPI_FILE = fileURLToPath(new URL('../../openapi-admin.yaml', import.meta.url));
const MAX_BODY_BYTES = 64 * 1024;

export interface AdminApi {
  /** Answers a request whose path is under /admin. */
  handle(req: IncomingMessage, res: ServerResponse, path: string): Promise<void>;
}

interface CompiledRoute {
  route: AdminRoute;
  pattern: RegExp;
  names: string[];
}

/**
 * The admin API under /admin/v1: JSON, every change through the key lifecycle (the same core as
 * the CLI), every error the usual Error body. Its OpenAPI document is served without a token;
 * everything else needs one (admin-auth.ts). An unknown path is 404 before authentication (the
 * paths are public in that document anyway).
 */
export function createAdminApi(
  deps: AdminDeps,
  tokens: AdminTokens,
  logger: Logger,
  consoleOidc?: () => ConsoleOidcConfig | undefined,
): AdminApi {
  // The console signs in with the same tokens and sends its session where a script sends its token.
  const sessions = new ConsoleSessions();
  const authenticate = adminAuthenticator(tokens, logger, undefined, sessions);
  const operatorConsole = createConsole({ sessions, signIn: authenticate.signIn, actionsOf: allowedActions, oidc: consoleOidc, logger });
  const document = loadOpenApiDocument(ADMIN_OPENAPI_FILE, '');
  const routes = [
    ...keysRoutes(deps),
    ...plansRoutes(deps),
    ...servicesRoutes(deps),
    ...auditRoutes(deps),
    ...trafficRoutes(deps),
    ...usageRoutes(deps),
  ].map(compile);

  return {
    async handle(req, res, path) {
      if (isConsolePath(path)) return operatorConsole.handle(req, res, path);
      const subpath = path.startsWith(`${ADMIN_BASE}/`) ? path.slice(ADMIN_BASE.length) : '';
      if (subpath === '/openapi.json') {
        if (req.method !== 'GET' && req.method !== 'HEAD') return sendError(res, 'method_not_allowed', undefined, { allow: 'GET, HEAD' });
        res.setHeader('content-type', 'application/json; charset=utf-8');
        res.setHeader('content-length', document.length);
        return void res.end(document);
      }
      const matches = routes.map((r) => ({ route: r.route, params: match(r, subpath) })).filter((m) => m.params !== null);
      if (matches.length === 0) return sendError(res, 'not_found');
      const auth = await authenticate(req);
      if ('code' in auth) return sendError(res, auth.code, auth.message, auth.headers);
      const chosen = matches.find((m) => m.route.method === req.method);
      if (!chosen) {
        const allow = matches.map((m) => m.route.method).join(', ');
        return sendError(res, 'method_not_allowed', `${req.method} is not allowed here; use ${allow}.`, { allow });
      }
      const { principal } = auth;
      const caller: Caller = { actor: principal.actor, role: principal.role, email: principal.email, label: (field) => field };
      try {
        const call = { params: chosen.params!, query: queryOf(req), body: once(() => bodyOf(req, res)) };
        const refused = await authorize(principal, chosen.route.action, call, deps.lifecycle.keys);
        if (refused) return sendError(res, 'insufficient_role', refused);
        const reply = await chosen.route.handle({ ...call, caller });
        // Create and rotate answer with a secret: nothing on the way may keep a copy.
        res.setHeader('cache-control', 'no-store');
        for (const [name, value] of Object.entries(reply.headers ?? {})) res.setHeader(name, value);
        if (reply.stream) await sendStream(res, reply.status, reply.stream);
        else sendJson(res, reply.status, reply.body);
      } catch (err) {
        if (err instanceof LifecycleError && !res.headersSent) sendError(res, err.code, err.message);
        else {
          // Message and code only: a store error can carry the command's arguments (a key hash).
          const { message, code } = err as { message?: string; code?: string };
          logger.error({ err: { message, code }, route: chosen.route.path }, 'admin request failed');
          // A stream that fails once begun cannot turn into an Error body: the connection ends short.
          if (res.headersSent) res.destroy();
          else sendError(res, 'internal_error');
        }
      } finally {
        logger.info(
          { actor: principal.actor, role: principal.role, method: req.method, route: chosen.route.path, status: res.statusCode },
          'admin request',
        );
      }
    },
  };
}

/** Writes each chunk as it comes, waiting while the client reads slowly; stops if it goes away. */
async function sendStream(res: ServerResponse, status: number, { contentType, chunks }: NonNullable<AdminReply['stream']>): Promise<void> {
  res.writeHead(status, { 'content-type': contentType });
  for await (const chunk of chunks) {
    if (res.destroyed) return;
    if (!res.write(chunk)) await Promise.race([onceEvent(res, 'drain'), onceEvent(res, 'close')]);
  }
  res.end();
}

function compile(route: AdminRoute): CompiledRoute {
  const names: string[] = [];
  const source = route.path.replace(/\{(\w+)\}/g, (_, name: string) => {
    names.push(name);
    return '([^/]+)';
  });
  return { route, pattern: new RegExp(`^${source}$`), names };
}

function match(compiled: CompiledRoute, path: string): Record<string, string> | null {
  const found = compiled.pattern.exec(path);
  if (!found) return null;
  const params: Record<string, string> = {};
  compiled.names.forEach((name, i) => (params[name] = found[i + 1]!));
  return params;
}

function queryOf(req: IncomingMessage): Record<string, string> {
  const search = new URL(req.url ?? '/', 'http://admin').searchParams;
  const query: Record<string, string> = {};
  for (const [name, value] of search) {
    if (Object.hasOwn(query, name)) throw new LifecycleError('invalid_query', 'a query parameter is given more than once');
    query[name] = value;
  }
  return query;
}

/** `read` called at most once: the access check and the route share one parsed body. */
function once<T>(read: () => Promise<T>): () => Promise<T> {
  let result: Promise<T> | undefined;
  return () => (result ??= read());
}

async function bodyOf(req: IncomingMessage, res: ServerResponse): Promise<unknown> {
  const result = await readJsonBody(req, MAX_BODY_BYTES, res);
  if (!result.ok) throw new LifecycleError(result.code, result.message ?? ERRORS[result.code].message);
  return result.value;
}
