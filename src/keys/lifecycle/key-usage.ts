import type { Quota } from '../../config/plans-schema.js';
import { quotaFor } from '../../quota/quota-for.js';
import { quotaSubject } from '../../quota/quota-subject.js';
import type { QuotaOutcome } from '../../quota/quota-state.js';
import { windowsOf } from '../../quota/rate-limit-headers.js';
import type { Consumer } from '../../auth/consumer.js';
import type { LifecycleDeps } from './deps.js';
import { findKey } from './find-key.js';
import { LifecycleError } from './lifecycle-error.js';

export interface UsageReport {
  id: string;
  plan: string;
  minute: WindowUsage;
  day: WindowUsage;
  /** Under a quota with `perMonth`: the month of the key's calendar (quota.timeZone, billing anchor). */
  month?: WindowUsage;
  /** Under a plan with `credits: required`: the prepaid balance left (the owner's under scope: owner). */
  credits?: number;
  /** ISO time the ban ends, or null. */
  bannedUntil: string | null;
  /** ISO time the key expires, or null. */
  expiresAt: string | null;
}

export interface WindowUsage {
  used: number;
  limit: number;
  remaining: number;
  resetAt: string;
}

/** Every window of a key without consuming anything (admin API, CLI and the key's own GET /v1/usage). */
export async function keyUsage(deps: LifecycleDeps, id: string): Promise<UsageReport> {
  const record = await findKey(deps, id);
  const quota = quotaFor(record, deps.plans());
  if (!quota) throw new LifecycleError('plan_not_configured', `key ${id} has plan "${record.plan}", which plans.yaml does not define`);
  // Under a `scope: owner` plan the windows are the owner's, shared by all of its keys.
  return usageReport(record, quota, await deps.quotas.usage(quotaSubject(record, quota), quota));
}

export function usageReport(record: Consumer, quota: Quota, outcome: QuotaOutcome): UsageReport {
  const windows = windowsOf(quota, outcome);
  const used = { minute: outcome.minuteCount, day: outcome.dayCount, month: outcome.monthCount ?? 0 };
  const of = (name: 'minute' | 'day' | 'month'): WindowUsage => {
    const w = windows.find((x) => x.name === name)!;
    return { used: used[name], limit: w.limit, remaining: w.remaining, resetAt: new Date(w.resetAtMs).toISOString() };
  };
  return {
    id: record.id,
    plan: record.plan,
    minute: of('minute'),
    day: of('day'),
    ...(quota.perMonth !== undefined && { month: of('month') }),
    ...(quota.credits === 'required' && { credits: outcome.creditBalance ?? 0 }),
    bannedUntil: outcome.verdict === 'banned' ? new Date(outcome.bannedUntilMs).toISOString() : null,
    expiresAt: record.expiresAt ?? null,
  };
}
