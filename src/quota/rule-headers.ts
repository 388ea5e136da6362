import type { Quota } from '../config/plans-schema.js';
import { ruleReport, type RuleCharge, type RuleReport } from './limit-rules.js';
import { binds, headersOf, policyOf, windowsOf } from './rate-limit-headers.js';
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
  const { nowMs } = outcome;
  // The plan's windows once (rateLimitHeaders would choose among them again), then the rules.
  const windows = windowsOf(quota, outcome);
  let waits = false;
  for (const window of windows) if (window.fitsAtMs > nowMs) waits = true;
  const reports: RuleReport[] = [];
  for (let i = 0; i < rules.length; i++) {
    const report = ruleReport(rules[i]!, states[i]!, nowMs);
    if (report.fitsAtMs > nowMs) waits = true;
    reports.push(report);
  }
  let binding: RuleReport = windows[0];
  for (const window of windows) if (binds(window, binding, waits)) binding = window;
  for (const report of reports) if (binds(report, binding, waits)) binding = report;
  if (waits) binding = { ...binding, resetAtMs: binding.fitsAtMs };
  if (outcome.verdict === 'banned') binding = { ...binding, remaining: 0, resetAtMs: outcome.bannedUntilMs };
  let policy = policyOf(quota);
  for (const rule of rules) policy += policyPart(rule);
  return { headers: headersOf(quota, outcome, binding, policy), retryAfterSeconds: secondsUntil(binding.resetAtMs, nowMs) };
}

const policyParts = new WeakMap<RuleCharge, string>();

/** A rule's entry in RateLimit-Policy, made once per charge (limit-rules.ts keeps one object per rule and values). */
function policyPart(rule: RuleCharge): string {
  let part = policyParts.get(rule);
  if (part === undefined) policyParts.set(rule, (part = `, "${rule.name}";q=${rule.limit};w=${rule.windowMs / 1000}`));
  return part;
}
