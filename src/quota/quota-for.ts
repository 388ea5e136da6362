import type { PlansConfig, Quota } from '../config/plans-schema.js';
import type { KeyRecord } from '../keys/record.js';

/** A key's own negotiated quota wins over its plan's; undefined when the plan is not configured. */
export function quotaFor(key: KeyRecord, plans: PlansConfig): Quota | undefined {
  if (key.perMinute !== undefined && key.perDay !== undefined) return { perMinute: key.perMinute, perDay: key.perDay };
  return plans.plans[key.plan];
}
