import type { Quota } from '../config/plans-schema.js';
import type { QuotaOutcome } from '../quota/quota-state.js';
import { windowsOf } from '../quota/rate-limit-headers.js';

export interface UsageReport {
  id: string;
  plan: string;
  minute: WindowUsage;
  day: WindowUsage;
  /** ISO time the ban ends, or null. */
  bannedUntil: string | null;
}

interface WindowUsage {
  used: number;
  limit: number;
  remaining: number;
  resetAt: string;
}

export function usageReport(id: string, plan: string, quota: Quota, outcome: QuotaOutcome): UsageReport {
  const windows = windowsOf(quota, outcome);
  const of = (name: 'minute' | 'day'): WindowUsage => {
    const w = windows.find((x) => x.name === name)!;
    const used = name === 'minute' ? outcome.minuteCount : outcome.dayCount;
    return { used, limit: w.limit, remaining: w.remaining, resetAt: new Date(w.resetAtMs).toISOString() };
  };
  return {
    id,
    plan,
    minute: of('minute'),
    day: of('day'),
    bannedUntil: outcome.verdict === 'banned' ? new Date(outcome.bannedUntilMs).toISOString() : null,
  };
}

export function describeUsage(report: UsageReport): string {
  const line = (name: string, w: WindowUsage) =>
    `${name.padEnd(8)}${String(w.used).padStart(9)} / ${String(w.limit).padEnd(9)} remaining ${String(w.remaining).padEnd(9)} resets ${w.resetAt}`;
  return [
    `id:     ${report.id} (plan ${report.plan})`,
    line('minute', report.minute),
    line('day', report.day),
    `banned: ${report.bannedUntil ? `until ${report.bannedUntil}` : 'no'}`,
  ].join('\n');
}
