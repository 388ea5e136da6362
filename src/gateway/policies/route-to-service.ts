import type { Upstreams } from '../../upstream/upstreams.js';
import { CONTINUE, type Policy } from '../context.js';

/**
 * Which service the request goes to (the longest path prefix a service claims, else `default`),
 * decided once on the canonical path, before the quota, so that the plan's `services` can be
 * checked before anything is consumed. The proxy forwards to that service.
 */
export function routeToService(upstreams: Upstreams): Policy {
  return (ctx) => {
    ctx.route = upstreams.route(ctx.req.url ?? '/');
    return CONTINUE;
  };
}
