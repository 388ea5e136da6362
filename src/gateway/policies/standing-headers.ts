import type { Consumer } from '../../auth/consumer.js';
import type { PlansConfig } from '../../config/plans-schema.js';
import { quotaFor } from '../../quota/quota-for.js';
import { quotaSubject } from '../../quota/quota-subject.js';
import { rateLimitHeaders } from '../../quota/rate-limit-headers.js';
import type { QuotaStore } from '../../store/quota-store.js';
import type { StoreHealth } from '../../store/store-health.js';
import type { Decision } from '../context.js';

export interface StandingDeps {
  quotas: QuotaStore;
  plans: () => PlansConfig;
  health?: StoreHealth;
}

/**
 * A refusal before the quota step (service_not_in_plan, insufficient_scope), with the rate-limit
 * headers of the consumer's windows as they stand, read without consuming (like serve-usage.ts),
 * so the refusal costs no quota and never counts towards a ban. While the store cannot be read
 * (or the plan is not configured), the refusal goes without those headers: the answer does not
 * depend on the store, and a 503 would invite a retry that cannot succeed.
 */
export function withStandingHeaders(
  consumer: Consumer,
  deps: StandingDeps,
  refusal: (headers?: Record<string, string>) => Decision,
): Decision | Promise<Decision> {
  const quota = quotaFor(consumer, deps.plans());
  if (!quota || deps.health?.isDown()) return refusal();
  return deps.quotas.usage(quotaSubject(consumer, quota), quota).then(
    (outcome) => refusal(rateLimitHeaders(quota, outcome)),
    (err: unknown) => {
      deps.health?.failed(err);
      return refusal();
    },
  );
}
