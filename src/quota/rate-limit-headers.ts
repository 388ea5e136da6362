import type { Quota } from '../config/plans-schema.js';
import { endOf, periodsAt } from './calendar.js';
import { fitsAtUs, gcraMinute, remainingAt } from './gcra.js';
import type { QuotaOutcome } from './quota-state.js';
import { DAY_MS, MINUTE_MS, secondsUntil, windowEndMs } from './windows.js';

/** `w` of RateLimit-Policy for a month: the draft names a window by seconds; a month's vary, so 30 days. */
const MONTH_POLICY_SECONDS = 30 * 86_400;

export interface WindowReport {
  name: 'minute' | 'day' | 'month';
  limit: number;
  /** Units that can be sent now. */
  remaining: number;
  windowSeconds: number;
  /**
   * A fixed window, and the day under either algorithm: the window's end. A gcra minute: when one
   * more unit than now can be sent (now, when all can).
   */
  resetAtMs: number;
  /** When a request of the outcome's cost fits this window: nowMs when it fits now. */
  fitsAtMs: number;
}

function fixedReport(
  name: WindowReport['name'],
  limit: number,
  windowSeconds: number,
  resetAtMs: number,
  used: number,
  outcome: QuotaOutcome,
): WindowReport {
  const remaining = Math.max(0, limit - used);
  return {
    name,
    limit,
    remaining,
    windowSeconds,
    resetAtMs,
    fitsAtMs: remaining >= outcome.cost ? outcome.nowMs : resetAtMs,
  };
}

function gcraMinuteReport(quota: Quota, outcome: QuotaOutcome): WindowReport {
  const { nowMs, cost, minuteTatUs: tatUs } = outcome;
  const window = gcraMinute(quota);
  const remaining = remainingAt(window, tatUs, nowMs * 1000);
  // A request at a whole millisecond is admitted from the first one at or after the exact moment.
  const resetAtMs = remaining >= window.burst ? nowMs : Math.ceil(fitsAtUs(window, tatUs, remaining + 1) / 1000);
  const fitsAtMs = remaining >= cost ? nowMs : Math.ceil(fitsAtUs(window, tatUs, cost) / 1000);
  return { name: 'minute', limit: window.limit, remaining, windowSeconds: MINUTE_MS / 1000, resetAtMs, fitsAtMs };
}

/**
 * Every window as of the outcome (the minute, the day, and the month under a quota with
 * `perMonth`), the binding one first. The day and the month are those of the quota's calendar
 * (calendar.ts; UTC days and calendar months by default) under both algorithms (gcra.ts): they
 * reset at their ends. When a request of this one's cost would have to wait, the window that
 * makes it wait longest binds and reports that moment as its reset (with several used up: the
 * longest, since a new minute does not let a request through). Otherwise the one with the fewest
 * units remaining binds and, on a tie, the one that resets later (the day when minute and day end
 * at midnight).
 */
export function windowsOf(quota: Quota, outcome: QuotaOutcome): [WindowReport, ...WindowReport[]] {
  const { nowMs } = outcome;
  const periods = periodsAt(nowMs, quota.calendar);
  const minute =
    quota.algorithm === 'gcra'
      ? gcraMinuteReport(quota, outcome)
      : fixedReport('minute', quota.perMinute, MINUTE_MS / 1000, windowEndMs(nowMs, MINUTE_MS), outcome.minuteCount, outcome);
  const day = fixedReport('day', quota.perDay, DAY_MS / 1000, endOf(periods.day, nowMs), outcome.dayCount, outcome);
  const windows: WindowReport[] = [minute, day];
  if (quota.perMonth !== undefined) {
    const monthEndMs = endOf(periods.month, nowMs);
    windows.push(fixedReport('month', quota.perMonth, MONTH_POLICY_SECONDS, monthEndMs, outcome.monthCount ?? 0, outcome));
  }
  let waits = false;
  for (const w of windows) if (w.fitsAtMs > nowMs) waits = true;
  let at = 0;
  for (let i = 1; i < windows.length; i++) if (binds(windows[i]!, windows[at]!, waits)) at = i;
  const [binding] = windows.splice(at, 1) as [WindowReport];
  return [waits ? { ...binding, resetAtMs: binding.fitsAtMs } : binding, ...windows];
}

/** Whether `a` binds rather than `b`. Windows come shortest first: on a full tie the longer one binds (`>=`). */
export function binds(a: Omit<WindowReport, 'name'>, b: Omit<WindowReport, 'name'>, waits: boolean): boolean {
  return waits
    ? a.fitsAtMs > b.fitsAtMs || (a.fitsAtMs === b.fitsAtMs && a.resetAtMs >= b.resetAtMs)
    : a.remaining < b.remaining || (a.remaining === b.remaining && a.resetAtMs >= b.resetAtMs);
}

/** What the headers report: the binding window, or while banned that window ending with the ban. */
export function reportedWindow(quota: Quota, outcome: QuotaOutcome): WindowReport {
  const [binding] = windowsOf(quota, outcome);
  if (outcome.verdict !== 'banned') return binding;
  return { ...binding, remaining: 0, resetAtMs: outcome.bannedUntilMs };
}

/**
 * The rate-limit fields of a response to an identified caller:
 * - X-RateLimit-Limit / -Remaining / -Reset (Unix seconds) for the binding window;
 * - RateLimit-Policy (every window) and RateLimit (the binding one), as in
 *   draft-ietf-httpapi-ratelimit-headers-11: `"minute";q=60;w=60` and `"minute";r=12;t=41`; a
 *   month is `"month";q=…;w=2592000` (30 days: the draft's `w` is seconds, a month's vary).
 *   (A day in a zone that changes its clocks lasts 23 or 25 hours; its `w` stays 86400.)
 * While banned, Remaining is 0 and Reset is the end of the ban: no request can succeed before.
 * Under a quota with `credits: required`, also Tollgate-Credits-Remaining: the balance after it.
 */
export function rateLimitHeaders(quota: Quota, outcome: QuotaOutcome): Record<string, string> {
  return headersOf(quota, outcome, reportedWindow(quota, outcome), policyOf(quota));
}

/**
 * The fields of rateLimitHeaders for `window`, already chosen as the one reported (with a ban's
 * end applied), under RateLimit-Policy `policy`: also rule-headers.ts's, whose window may be a rule.
 */
export function headersOf(
  quota: Quota,
  outcome: QuotaOutcome,
  window: Pick<WindowReport, 'limit' | 'remaining' | 'resetAtMs'> & { name: string },
  policy: string,
): Record<string, string> {
  const headers: Record<string, string> = {
    'x-ratelimit-limit': String(window.limit),
    'x-ratelimit-remaining': String(window.remaining),
    'x-ratelimit-reset': String(Math.ceil(window.resetAtMs / 1000)),
    'ratelimit-policy': policy,
    ratelimit: `"${window.name}";r=${window.remaining};t=${secondsUntil(window.resetAtMs, outcome.nowMs)}`,
  };
  if (quota.credits === 'required') headers[CREDITS_HEADER] = String(outcome.creditBalance ?? 0);
  return headers;
}

/**
 * The rate-limit fields of an answer given without a decision (503 `gateway_overloaded`: Redis
 * not asked, or not answering, in time), from `heard`: the counts this replica last heard from
 * Redis. A window already spent as heard is still spent (counts only grow in a window), so it is
 * told as is, its reset the real one. Otherwise the minute is told with Remaining 0: other
 * replicas may have used the rest since, and Remaining never overstates; its reset is at most a
 * minute away. No credit balance: it is not known here (and 0 would ask for a top-up).
 */
export function undecidedHeaders(quota: Quota, heard: QuotaOutcome): Record<string, string> {
  let outcome = heard;
  if (reportedWindow(quota, heard).remaining > 0) {
    // The minute spent (fixed: its count at the limit; gcra: its bucket full as of now), for a
    // request of one unit, so that it binds: no other window waits.
    const minute = quota.algorithm === 'gcra' ? gcraMinute(quota) : undefined;
    const fullTatUs = minute ? heard.nowMs * 1000 + minute.burst * minute.intervalUs : 0;
    outcome = { ...heard, cost: 1, minuteCount: quota.perMinute, minuteTatUs: fullTatUs };
  }
  const headers = rateLimitHeaders(quota, outcome);
  delete headers[CREDITS_HEADER];
  return headers;
}

/** The credit balance after the request, on every answer under a quota with `credits: required`. */
export const CREDITS_HEADER = 'tollgate-credits-remaining';

const policies = new WeakMap<Quota, string>();

/** RateLimit-Policy: the same for every response under one quota (quota-for.ts keeps one object per key). */
export function policyOf(quota: Quota): string {
  let policy = policies.get(quota);
  if (policy === undefined) {
    policy = `"minute";q=${quota.perMinute};w=${MINUTE_MS / 1000}, "day";q=${quota.perDay};w=${DAY_MS / 1000}`;
    if (quota.perMonth !== undefined) policy += `, "month";q=${quota.perMonth};w=${MONTH_POLICY_SECONDS}`;
    policies.set(quota, policy);
  }
  return policy;
}

/**
 * Whole seconds (≥ 1, rounded up) until the refused request would be admitted: the reset the
 * headers report. A refusal means a window has no room for the request's cost; the binding window
 * is then the one whose room comes last (windowsOf), so Retry-After, X-RateLimit-Reset and
 * RateLimit's `t` name the same moment, for fixed and gcra plans alike.
 */
export function retryAfterSeconds(quota: Quota, outcome: QuotaOutcome): number {
  return secondsUntil(reportedWindow(quota, outcome).resetAtMs, outcome.nowMs);
}
