import { anchorDayOf } from '../config/calendar-fields.js';
import type { PlansConfig, Quota } from '../config/plans-schema.js';
import type { Consumer } from '../auth/consumer.js';

/**
 * A key's own negotiated windows win over its plan's (how they are enforced stays the plan's), and
 * a key's own `shadow`, `perMonth` and `maxConcurrent` over the plan's. The day and month follow
 * the plans' zone (gateway.yaml quota.timeZone) and the key's billing anchor. Undefined when the key has no
 * windows of its own and its plan is not configured.
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
/** Per plans: each plan's quota in the plans' zone, for consumers with nothing of their own. */
const inZone = new WeakMap<PlansConfig, Map<string, Quota>>();

function derive(key: Consumer, plans: PlansConfig): Quota | undefined {
  const plan = plans.plans[key.plan];
  const own = key.perMinute !== undefined && key.perDay !== undefined;
  const anchorDay = key.billingAnchor === undefined ? undefined : anchorDayOf(key.billingAnchor);
  const zoned = plans.timeZone !== undefined || anchorDay !== undefined;
  const plain =
    !own && key.shadow === undefined && key.perMonth === undefined && key.maxConcurrent === undefined && anchorDay === undefined;
  if (plain && !zoned) return plan;
  // A consumer with nothing of its own has its plan's quota in the plans' zone: one object per plan
  // and plans, whatever the consumer object (an anonymous caller is a new one on every request, and
  // a lease is held for one quota object: quota-leases.ts).
  if (plain && plan) {
    let zonedPlans = inZone.get(plans);
    if (!zonedPlans) inZone.set(plans, (zonedPlans = new Map()));
    let quota = zonedPlans.get(key.plan);
    if (!quota) zonedPlans.set(key.plan, (quota = { ...plan, calendar: { timeZone: plans.timeZone ?? 'UTC' } }));
    return quota;
  }
  const windows = own ? { perMinute: key.perMinute, perDay: key.perDay } : plan;
  if (!windows) return undefined;
  return {
    ...plan,
    ...windows,
    ...(key.perMonth !== undefined && { perMonth: key.perMonth }),
    ...(key.maxConcurrent !== undefined && { maxConcurrent: key.maxConcurrent }),
    ...(key.shadow !== undefined && { shadow: key.shadow }),
    ...(zoned && { calendar: { timeZone: plans.timeZone ?? 'UTC', ...(anchorDay !== undefined && { anchorDay }) } }),
  };
}
