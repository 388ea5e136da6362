import { clientAddressOf } from '../../http/client-address.js';
import type { ProxyTrust } from '../../http/proxy-trust.js';
import type { Metrics } from '../../observability/metrics.js';
import type { IpRulesConfig } from '../../policies/ip-rules/ip-rules-schema.js';
import { keyAdmits, type IpRules } from '../../policies/ip-rules/ip-rules.js';
import { globalIpRulesPolicy, serviceIpRulesPolicy } from '../../policies/ip-rules/ip-rules-policy.js';
import type { ServiceConfig } from '../../config/services-schema.js';
import type { Upstreams } from '../../upstream/upstreams.js';
import { CONTINUE, reject, type Decision, type Policy, type RequestContext } from '../context.js';
import { builtInStep, type PhaseDeps } from '../user-policies/phases.js';
import { bindBuiltIn, type BoundPolicy } from '../user-policies/policies-in-force.js';

/** The IP rules in force (gateway.yaml, hot), bound to their policies: none when there is no rule. */
export interface IpRulesInForce {
  global: readonly BoundPolicy[];
  services: ReadonlyMap<string, readonly BoundPolicy[]>;
}

/** Compiled at each load of gateway.yaml: an empty top-level `ipRules` binds nothing, so it costs nothing per request. */
export function ipRulesInForce(global: IpRulesConfig, services: readonly ServiceConfig[]): IpRulesInForce {
  const bound = bindBuiltIn(globalIpRulesPolicy, global);
  return {
    global: (bound.options as IpRules).empty ? [] : [bound],
    services: new Map(services.filter((s) => s.ipRules).map((s) => [s.name, [bindBuiltIn(serviceIpRulesPolicy, s.ipRules)]])),
  };
}

export interface IpRulesDeps {
  rules: () => IpRulesInForce;
  upstreams: Upstreams;
  proxyTrust: ProxyTrust;
  metrics: Metrics;
  /** Runs the rules' policies (user-policies/phases.ts), contained like every policy. */
  policies: PhaseDeps;
  /** Counts a refusal toward the failed-authentication limit of its address (limit-failed-auth.ts). */
  countFailure: (ctx: RequestContext, refusal: Decision & object) => Promise<Decision>;
}

const NONE: readonly BoundPolicy[] = [];

/**
 * The global `ipRules`, first in the chain after the request id: a denied network is answered 403
 * from memory, before the OpenAPI document, the key lookup or any Redis command, so a flood from it
 * costs the store nothing (and for that reason is not counted toward the failed-auth limit, which
 * lives in Redis).
 */
export function globalIpRules(deps: IpRulesDeps): Policy {
  const step = builtInStep(() => deps.rules().global, deps.policies);
  return (ctx) => {
    const decision = step(ctx) as Decision;
    if (decision) deps.metrics.ipRefusals.inc({ rule: 'global' });
    return decision;
  };
}

/**
 * The `ipRules` of the service the path routes to, before authentication (no key is looked up for
 * a network the service refuses); the refusal counts toward the address's failed-auth limit.
 */
export function serviceIpRules(deps: IpRulesDeps): Policy {
  const step = builtInStep((ctx) => {
    const rules = deps.rules().services;
    if (rules.size === 0) return NONE;
    ctx.route = deps.upstreams.route(ctx.req.url ?? '/');
    return rules.get(ctx.route.service.name) ?? NONE;
  }, deps.policies);
  return (ctx) => {
    const decision = step(ctx) as Decision;
    if (!decision) return CONTINUE;
    deps.metrics.ipRefusals.inc({ rule: `service:${ctx.route!.service.name}` });
    return deps.countFailure(ctx, decision);
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
