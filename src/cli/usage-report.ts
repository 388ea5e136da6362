import type { UsageReport, WindowUsage } from '../keys/lifecycle/key-usage.js';

/** `tollgate keys usage` in human form. */
export function describeUsage(report: UsageReport): string {
  const line = (name: string, w: WindowUsage) =>
    `${name.padEnd(8)}${String(w.used).padStart(9)} / ${String(w.limit).padEnd(9)} remaining ${String(w.remaining).padEnd(9)} resets ${w.resetAt}`;
  return [
    `id:     ${report.id} (plan ${report.plan})`,
    line('minute', report.minute),
    line('day', report.day),
    ...(report.month ? [line('month', report.month)] : []),
    `banned: ${report.bannedUntil ? `until ${report.bannedUntil}` : 'no'}`,
    `expiry: ${report.expiresAt ?? 'none'}`,
  ].join('\n');
}
