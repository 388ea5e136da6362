import type { Quota } from '../config/plans-schema.js';
import { ruleReport, type RuleCharge, type RuleReport } from './limit-rules.js';
import { binds, rateLimitHeaders, windowsOf } from './rate-limit-headers.js';
import type { QuotaOutcome } from './quota-state.js';
import type { RuleState } from './limit-rules.js';
import { secondsUntil } from './windows.js';

/**
 * The rate-limit fields of a request its limit rules applied to: RateLimit-Policy lists the plan's
 * windows and every rule (`"login-per-address";q=10;w=60`); X-RateLimit-*, RateLimit and
 * Retry-After name the binding one among all of them, chosen as among the plan's windows
 * (rate-limit-headers.ts windowsOf: when the request would have to wait, the one that makes it wait
 * longest; else the fewest remaining, a tie to the later reset). While banned, the ban's end.
 */
export function rulesHeaders(
  quota: Quota,
  outcome: QuotaOutcome,
  rules: readonly RuleCharge[],
  states: readonly RuleState[],
): { headers: Record<string, string>; retryAfterSeconds: number } {
  const headers = rateLimitHeaders(quota, outcome);
  const { nowMs } = outcome;
  const reports: RuleReport[] = [...windowsOf(quota, outcome), ...rules.map((rule, i) => ruleReport(rule, states[i]!, nowMs))];
  const waits = reports.some((report) => report.fitsAtMs > nowMs);
  let binding = reports[0]!;
  for (const report of reports) if (binds(report, binding, waits)) binding = report;
  if (waits) binding = { ...binding, resetAtMs: binding.fitsAtMs };
  if (outcome.verdict === 'banned') binding = { ...binding, remaining: 0, resetAtMs: outcome.bannedUntilMs };
  headers['x-ratelimit-limit'] = String(binding.limit);
  headers['x-ratelimit-remaining'] = String(binding.remaining);
  headers['x-ratelimit-reset'] = String(Math.ceil(binding.resetAtMs / 1000));
  headers['ratelimit-policy'] += rules.map((rule) => `, "${rule.name}";q=${rule.limit};w=${rule.windowMs / 1000}`).join('');
  headers.ratelimit = `"${binding.name}";r=${binding.remaining};t=${secondsUntil(binding.resetAtMs, nowMs)}`;
  return { headers, retryAfterSeconds: secondsUntil(binding.resetAtMs, nowMs) };
}
