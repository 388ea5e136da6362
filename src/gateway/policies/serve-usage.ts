import type { PlansConfig } from '../../config/plans-schema.js';
import { usageReport } from '../../keys/lifecycle/key-usage.js';
import { quotaFor } from '../../quota/quota-for.js';
import { quotaSubject } from '../../quota/quota-subject.js';
import { rateLimitHeaders } from '../../quota/rate-limit-headers.js';
import type { QuotaStore } from '../../store/quota-store.js';
import type { StoreHealth } from '../../store/store-health.js';
import { CONTINUE, reject, type Answer, type Decision, type Policy } from '../context.js';

/**
 * The caller's own usage at `path` (e.g. /v1/usage): plan, both windows, ban and expiry. Placed
 * after authentication (so failed attempts count towards the failed-authentication limit) and
 * before the quota, which it reads without consuming: asking how much is left costs nothing.
 * An empty `path` turns it off (the path is then proxied like any other).
 */
export function serveUsage(path: string, deps: { quotas: QuotaStore; plans: () => PlansConfig; health?: StoreHealth }): Policy {
  const unavailable = reject('rate_limit_store_unavailable', undefined, { 'retry-after': 1 });
  if (path === '') return () => CONTINUE;
  return (ctx) => {
    const url = ctx.req.url ?? '';
    // The path exactly, with or without a query string.
    if (!url.startsWith(path) || (url.length > path.length && url.charCodeAt(path.length) !== 63) /* ? */) return CONTINUE;
    const method = ctx.req.method;
    const allowed = method === 'GET' || method === 'HEAD';
    const record = ctx.consumer!;
    const quota = quotaFor(record, deps.plans());
    if (!quota) return reject('plan_not_configured');
    // While the shared breaker says the store is down, answer at once instead of waiting a timeout.
    if (deps.health?.isDown()) return unavailable;
    return deps.quotas.usage(quotaSubject(record, quota), quota).then(
      (outcome): Decision => {
        // Like every answer to an identified caller, a 405 carries the rate-limit headers.
        if (!allowed)
          return reject('method_not_allowed', `${method} is not allowed on ${path}.`, {
            allow: 'GET, HEAD',
            ...rateLimitHeaders(quota, outcome),
          });
        const answer: Answer = {
          status: 200,
          headers: { ...rateLimitHeaders(quota, outcome), 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' },
          body: Buffer.from(JSON.stringify(usageReport(record, quota, outcome))),
        };
        return answer;
      },
      (err: unknown) => {
        deps.health?.failed(err);
        return unavailable;
      },
    );
  };
}
