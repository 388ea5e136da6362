import type { IncomingMessage } from 'node:http';
import type { BackendDeps } from './backend-deps.js';
import { createCategory, listCategories } from './category-handlers.js';
import { listOrdersPlaceholder, showPetPlaceholder } from './placeholder-handlers.js';
import { errorReply, type Reply } from './reply.js';

/** A handler gets the request, the path's captured segments in order, and the dependencies. */
export type Handler = (req: IncomingMessage, params: string[], deps: BackendDeps) => Promise<Reply>;

interface Route {
  /** As openapi.yaml writes it: the trace's http.route, never the path as sent. */
  template: string;
  path: RegExp;
  handlers: Readonly<Record<string, Handler>>;
}

// Every route of the service, base path /v1 (openapi.yaml). Paths match exactly: no trailing slash.
const ROUTES: readonly Route[] = [
  { template: '/v1/categories', path: /^\/v1\/categories$/, handlers: { GET: listCategories, POST: createCategory } },
  { template: '/v1/pets/{petId}', path: /^\/v1\/pets\/([^/]+)$/, handlers: { GET: showPetPlaceholder } },
  { template: '/v1/store/orders', path: /^\/v1\/store\/orders$/, handlers: { GET: listOrdersPlaceholder } },
];

export type RouteMatch = { handler: Handler; params: string[] } | { reply: Reply };

/** The handler for a method and path (query string already removed), or the 404/405 to send. */
export function matchRoute(method: string, path: string): RouteMatch {
  for (const route of ROUTES) {
    const match = route.path.exec(path);
    if (!match) continue;
    // HEAD is GET without a body (RFC 9110 §9.3.2); node:http drops the body of a HEAD response.
    const handler = handlerFor(route, method) ?? (method === 'HEAD' ? handlerFor(route, 'GET') : undefined);
    if (handler) return { handler, params: match.slice(1) };
    return { reply: errorReply('method_not_allowed', `${method} is not allowed on ${path}.`, { allow: allowedMethods(route) }) };
  }
  return { reply: errorReply('not_found', `No resource at ${path}.`) };
}

/** The route template a path matches, or undefined. */
export function routeTemplate(path: string): string | undefined {
  return ROUTES.find((route) => route.path.test(path))?.template;
}

// Own properties only: a method name must never reach Object.prototype.
function handlerFor(route: Route, method: string): Handler | undefined {
  return Object.hasOwn(route.handlers, method) ? route.handlers[method] : undefined;
}

function allowedMethods(route: Route): string {
  const methods = Object.keys(route.handlers);
  if (methods.includes('GET')) methods.push('HEAD');
  return methods.join(', ');
}
