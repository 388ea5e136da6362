import type { PlansConfig, Quota } from '../config/plans-schema.js';
import type { Consumer } from '../auth/consumer.js';

/**
 * A key's own negotiated windows win over its plan's (how they are enforced stays the plan's), and
 * a key's own `shadow` over the plan's. Undefined when the key has no windows of its own and its
 * plan is not configured.
 */
export function quotaFor(key: Consumer, plans: PlansConfig): Quota | undefined {
  const known = derived.get(key);
  if (known?.plans === plans) return known.quota;
  const quota = derive(key, plans);
  derived.set(key, { plans, quota });
  return quota;
}

/**
 * Records and plans are never changed in place (a change is a new record in the key cache, a
 * reload new plans), so a key's quota is derived once per pair: one object per key, which the
 * stores and the headers can recognise instead of comparing fields on every request.
 */
const derived = new WeakMap<Consumer, { plans: PlansConfig; quota: Quota | undefined }>();

function derive(key: Consumer, plans: PlansConfig): Quota | undefined {
  const plan = plans.plans[key.plan];
  const own = key.perMinute !== undefined && key.perDay !== undefined;
  if (!own && key.shadow === undefined) return plan;
  const windows = own ? { perMinute: key.perMinute, perDay: key.perDay } : plan;
  if (!windows) return undefined;
  return { ...plan, ...windows, ...(key.shadow !== undefined && { shadow: key.shadow }) };
}
