import type { PlansConfig, Quota } from '../config/plans-schema.js';
import type { KeyRecord } from '../keys/record.js';

/**
 * A key's own negotiated windows win over its plan's (how they are enforced stays the plan's), and
 * a key's own `shadow` over the plan's. Undefined when the key has no windows of its own and its
 * plan is not configured.
 */
export function quotaFor(key: KeyRecord, plans: PlansConfig): Quota | undefined {
  const plan = plans.plans[key.plan];
  const own = key.perMinute !== undefined && key.perDay !== undefined;
  if (!own && key.shadow === undefined) return plan;
  const windows = own ? { perMinute: key.perMinute!, perDay: key.perDay! } : plan;
  if (!windows) return undefined;
  return { ...plan, ...windows, ...(key.shadow !== undefined && { shadow: key.shadow }) };
}
