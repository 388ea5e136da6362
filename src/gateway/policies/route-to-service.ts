import type { PlansConfig } from '../../config/plans-schema.js';
import { quotaFor } from '../../quota/quota-for.js';
import { quotaSubject } from '../../quota/quota-subject.js';
import { rateLimitHeaders } from '../../quota/rate-limit-headers.js';
import type { QuotaStore } from '../../store/quota-store.js';
import type { StoreHealth } from '../../store/store-health.js';
import type { Upstreams } from '../../upstream/upstreams.js';
import { CONTINUE, reject, type Decision, type Policy } from '../context.js';

export interface PlanServiceDeps {
  quotas: QuotaStore;
  plans: () => PlansConfig;
  health?: StoreHealth;
}

/**
 * Which service the request goes to (the longest path prefix a service claims, else `default`),
 * decided once on the canonical path, before the quota, so that the plan's `services` can be
 * checked before anything is consumed. The proxy forwards to that service.
 *
 * A plan that lists `services` lets its keys call only those: another one is answered 403
 * service_not_in_plan with the rate-limit headers of the caller's windows as they stand, read
 * without consuming (like serve-usage.ts), so the refusal costs no quota and never counts towards
 * a ban. While the store cannot be read, the 403 goes without those headers: the answer does not
 * depend on the store, and a 503 would invite a retry that cannot succeed. A shadow plan (or key)
 * admits the request instead, marked `X-RateLimit-Shadow: service_not_in_plan`, and the quota then
 * counts it as any admitted request.
 */
export function routeToService(upstreams: Upstreams, deps: PlanServiceDeps): Policy {
  return (ctx) => {
    // Routed already when the service's IP rules ran (ip-rules.ts).
    ctx.route ??= upstreams.route(ctx.req.url ?? '/');
    const key = ctx.consumer!;
    // An unconfigured plan is enforce-quota's refusal (plan_not_configured), not this one.
    const quota = quotaFor(key, deps.plans());
    if (!quota?.services || quota.services.includes(ctx.route.service.name)) return CONTINUE;
    if (quota.shadow) {
      ctx.res.setHeader('x-ratelimit-shadow', 'service_not_in_plan');
      ctx.shadowRefusal = 'service_not_in_plan';
      return CONTINUE;
    }
    const refusal = (headers?: Record<string, string>): Decision =>
      reject('service_not_in_plan', `The plan "${key.plan}" does not include the service "${ctx.route!.service.name}".`, headers);
    if (deps.health?.isDown()) return refusal();
    return deps.quotas.usage(quotaSubject(key, quota), quota).then(
      (outcome) => refusal(rateLimitHeaders(quota, outcome)),
      (err: unknown) => {
        deps.health?.failed(err);
        return refusal();
      },
    );
  };
}
