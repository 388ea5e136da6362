import { CONTINUE, reject, type Policy } from '../context.js';
import { pathOf, type RouteRules } from '../route-rules.js';

/**
 * Deprecation and sunset (after the quota check, so these answers count and carry the rate-limit
 * headers). A matching request gets `Deprecation`, `Sunset` and `Link` on whatever answers it:
 * the proxied response, a backend error, a 502/504. After the sunset date a rule with
 * `goneAfterSunset` answers 410 route_sunset instead of proxying.
 *
 * `rules` is read per request, so a reloaded gateway.yaml applies from the next request on;
 * `nowMs` is injected so tests can stand on either side of a sunset.
 */
export function applyRouteRules(rules: () => RouteRules, nowMs: () => number = Date.now): Policy {
  return (ctx) => {
    const rule = rules().match(ctx.req.method ?? 'GET', pathOf(ctx.req.url));
    if (!rule) return CONTINUE;
    for (const [name, value] of rule.headers) ctx.res.setHeader(name, value);
    if (rule.goneAfterSunset && nowMs() >= rule.sunsetAtMs) return reject('route_sunset', rule.goneMessage);
    return CONTINUE;
  };
}
