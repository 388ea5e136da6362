import type { CorsConfig } from '../../policies/cors/cors-schema.js';
import { corsRulesOf } from '../../policies/cors/cors-rules.js';
import type { Upstreams } from '../../upstream/upstreams.js';
import { CONTINUE, reject, type Answer, type Decision, type Policy, type RequestContext } from '../context.js';
import { isWebSocketHandshake } from '../websocket-proxy.js';

export interface CorsDeps {
  /** gateway.yaml's top-level `cors:` as of now (hot), absent when not configured. */
  global: () => CorsConfig | undefined;
  /** Some service has its own `cors:` (as of now): without it, and without `global`, nothing is routed here. */
  anyService: () => boolean;
  upstreams: Upstreams;
  /** Counts a preflight against its address's budget of `perMinute` (limit-preflights.ts): seconds to wait once over it, else 0. */
  countPreflight: (ctx: RequestContext, perMinute: number) => Promise<number>;
}

const EMPTY = Buffer.alloc(0);
const PREFLIGHT_VARY = 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers';

/**
 * CORS, before anything else that answers (the OpenAPI document, authentication): the path is
 * routed first, without a key, so that a service's own `cors:` decides for its paths.
 *
 * - Any request where a `cors:` applies gets `Vary: Origin` (a cache must not hand one origin's
 *   answer to another) and, from an allowed origin, Access-Control-Allow-Origin (that origin),
 *   -Expose-Headers and -Allow-Credentials, set on the response now so that they stand on every
 *   answer that follows: the proxied one and every Error body of the gateway alike.
 * - A preflight (OPTIONS with Origin and Access-Control-Request-Method) is answered here and never
 *   forwarded: 204 for an allowed origin, 403 cors_origin_not_allowed without any
 *   Access-Control-Allow-* field otherwise. It needs no key and costs no quota, so it counts against
 *   the preflight budget of its address (`preflightsPerMinute`), never the failed-authentication
 *   limit: past it, 429 too_many_preflights.
 * - A WebSocket handshake from a browser page whose origin is not allowed is refused 403.
 */
export function cors(deps: CorsDeps): Policy {
  return (ctx) => {
    const global = deps.global();
    if (!global && !deps.anyService()) return CONTINUE;
    const config = deps.upstreams.route(ctx.req.url ?? '/').service.config.cors ?? global;
    if (!config) return CONTINUE;
    ctx.corsApplies = true;
    const rules = corsRulesOf(config);
    const { req, res } = ctx;
    const origin = req.headers.origin;
    const allowed = rules.allows(origin);
    const preflight = req.method === 'OPTIONS' && origin !== undefined && req.headers['access-control-request-method'] !== undefined;
    if (!preflight) {
      res.setHeader('vary', 'Origin');
      // Browsers apply no CORS to WebSockets but do send their page's Origin: a handshake from a
      // page this section does not allow is refused here (cross-site WebSocket hijacking).
      // Clients that are not browsers send no Origin and are not concerned.
      if (!allowed && origin !== undefined && isWebSocketHandshake(req)) return reject('cors_origin_not_allowed');
      if (allowed) setAll(ctx, rules.actualHeaders(origin));
      return CONTINUE;
    }
    res.setHeader('vary', PREFLIGHT_VARY);
    return deps.countPreflight(ctx, config.preflightsPerMinute).then((waitSeconds): Decision => {
      if (!allowed)
        return reject(
          'cors_origin_not_allowed',
          `The origin ${JSON.stringify(String(req.headers.origin).slice(0, 200))} may not call this API from a browser.`,
        );
      const headers = rules.preflightHeaders(origin, req.headers['access-control-request-headers']);
      if (waitSeconds > 0) {
        // The refusal must be readable as one: the page's console shows a 429, not a CORS error.
        setAll(ctx, rules.actualHeaders(origin));
        return reject('too_many_preflights', undefined, { 'retry-after': waitSeconds });
      }
      const answer: Answer = { status: 204, headers, body: EMPTY };
      return answer;
    });
  };
}

function setAll(ctx: RequestContext, headers: Record<string, string>): void {
  for (const name in headers) ctx.res.setHeader(name, headers[name]!);
}
