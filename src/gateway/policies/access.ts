import { AnonymousConsumers } from '../../auth/anonymous-consumer.js';
import type { Consumer } from '../../auth/consumer.js';
import { missingScopes } from '../../policies/access/scope.js';
import type { Upstreams } from '../../upstream/upstreams.js';
import { CONTINUE, reject, type Policy, type RequestContext } from '../context.js';
import { OPEN, type Access, type RouteAccess } from '../route-access.js';
import { pathOf } from '../route-rules.js';
import type { ProxyTrust } from '../../http/proxy-trust.js';
import { clientAddress } from './limit-failed-auth.js';
import { withStandingHeaders, type StandingDeps } from './standing-headers.js';

// Who may call a route (docs/policies.md, "Scopes and anonymous callers"): the anonymous consumer
// admitted by authenticate.ts when no credential came, and the scopes checked before the quota.

export interface AccessDeps {
  access: () => RouteAccess;
  upstreams: Upstreams;
}

/** What the request's route asks of its caller, decided once (the request is routed here if it was not yet). */
export function accessOf(ctx: RequestContext, deps: AccessDeps): Access {
  if (ctx.access) return ctx.access;
  const access = deps.access();
  if (access.none) return (ctx.access = OPEN);
  ctx.route ??= deps.upstreams.route(ctx.req.url ?? '/');
  ctx.access = access.of(ctx.req.method ?? 'GET', pathOf(ctx.req.url), ctx.route.service.name);
  return ctx.access;
}

/**
 * For authenticate.ts, asked only when a request carries no Authorization header at all: the
 * anonymous consumer of its trusted client address (behind `trustProxyHops` or `trustedProxies`) when the route admits
 * anonymous callers, else undefined (401 missing_api_key, as ever).
 */
export function anonymousCaller(
  deps: AccessDeps & { consumers: AnonymousConsumers; proxyTrust: ProxyTrust },
): (ctx: RequestContext) => Consumer | undefined {
  return (ctx) => {
    const plan = accessOf(ctx, deps).anonymousPlan;
    return plan === undefined ? undefined : deps.consumers.of(clientAddress(ctx, deps.proxyTrust), plan);
  };
}

/**
 * After routing, before the quota: a consumer lacking a scope the route requires is refused 403
 * insufficient_scope with the RFC 6750 §3.1 challenge naming every required scope, and the
 * rate-limit headers as they stand (nothing consumed). An anonymous caller holds no scope: it is
 * told a credential is needed (401 missing_api_key, with the same `scope` attribute).
 */
export function requireScopes(deps: AccessDeps & StandingDeps): Policy {
  return (ctx) => {
    const required = accessOf(ctx, deps).scopes;
    if (required.length === 0) return CONTINUE;
    const consumer = ctx.consumer!;
    const missing = missingScopes(required, consumer.scopes);
    if (missing.length === 0) return CONTINUE;
    const scope = required.join(' ');
    if (consumer.anonymous) {
      return withStandingHeaders(consumer, deps, (headers) =>
        reject('missing_api_key', undefined, { ...headers, 'www-authenticate': `Bearer realm="tollgate", scope="${scope}"` }),
      );
    }
    return withStandingHeaders(consumer, deps, (headers) =>
      reject('insufficient_scope', `This operation requires the scope ${missing.join(' and ')}.`, {
        ...headers,
        'www-authenticate': `Bearer realm="tollgate", error="insufficient_scope", scope="${scope}"`,
      }),
    );
  };
}
