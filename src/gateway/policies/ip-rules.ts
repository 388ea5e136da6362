import { clientAddressOf } from '../../http/client-address.js';
import type { ProxyTrust } from '../../http/proxy-trust.js';
import type { Metrics } from '../../observability/metrics.js';
import { keyAdmits, type IpRules } from '../../policies/ip-rules/ip-rules.js';
import type { Upstreams } from '../../upstream/upstreams.js';
import { CONTINUE, reject, type Decision, type Policy, type RequestContext } from '../context.js';

/** The IP rules in force (gateway.yaml, hot): the global ones and each service's. */
export interface IpRulesInForce {
  global: IpRules;
  services: ReadonlyMap<string, IpRules>;
}

export interface IpRulesDeps {
  rules: () => IpRulesInForce;
  upstreams: Upstreams;
  proxyTrust: ProxyTrust;
  metrics: Metrics;
  /** Counts a refusal toward the failed-authentication limit of its address (limit-failed-auth.ts). */
  countFailure: (ctx: RequestContext, refusal: Decision & object) => Promise<Decision>;
}

/**
 * The global `ipRules`, first in the chain after the request id: a denied network is answered 403
 * from memory, before the OpenAPI document, the key lookup or any Redis command, so a flood from it
 * costs the store nothing (and for that reason is not counted toward the failed-auth limit, which
 * lives in Redis).
 */
export function globalIpRules(deps: IpRulesDeps): Policy {
  return (ctx) => {
    const rules = deps.rules().global;
    if (rules.empty || rules.admits(clientAddressOf(ctx.req, deps.proxyTrust))) return CONTINUE;
    deps.metrics.ipRefusals.inc({ rule: 'global' });
    return reject('ip_not_allowed');
  };
}

/**
 * The `ipRules` of the service the path routes to, before authentication (no key is looked up for
 * a network the service refuses); the refusal counts toward the address's failed-auth limit.
 */
export function serviceIpRules(deps: IpRulesDeps): Policy {
  return (ctx) => {
    const rules = deps.rules().services;
    if (rules.size === 0) return CONTINUE;
    ctx.route = deps.upstreams.route(ctx.req.url ?? '/');
    const service = ctx.route.service.name;
    const serviceRules = rules.get(service);
    if (!serviceRules || serviceRules.admits(clientAddressOf(ctx.req, deps.proxyTrust))) return CONTINUE;
    deps.metrics.ipRefusals.inc({ rule: `service:${service}` });
    return deps.countFailure(ctx, reject('ip_not_allowed', `Requests from this network are not allowed to the service "${service}".`));
  };
}

/**
 * A key restricted to `allowedCidrs`, right after authentication: used from elsewhere it is
 * refused 403 before any quota is read or consumed, and the refusal counts toward the address's
 * failed-auth limit (a stolen key tried from many places is throttled like a guessed one).
 */
export function keyIpRules(deps: IpRulesDeps): Policy {
  return (ctx) => {
    const key = ctx.consumer;
    if (!key?.allowedCidrs || keyAdmits(key, clientAddressOf(ctx.req, deps.proxyTrust))) return CONTINUE;
    deps.metrics.ipRefusals.inc({ rule: 'key' });
    return deps.countFailure(ctx, reject('ip_not_allowed', 'This API key may not be used from this network.'));
  };
}
