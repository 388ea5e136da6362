import { LRUCache } from 'lru-cache';
import { ruleReport, sameRuleLimits, type RuleCharge } from '../quota/limit-rules.js';
import { MINUTE_MS } from '../quota/windows.js';
import type { RulesOutcome } from '../store/quota-store.js';

interface Refusal {
  /** The rules the refusal was decided for: a reload may give a counter's name other limits. */
  rules: readonly RuleCharge[];
  outcome: RulesOutcome;
  /** Local clock when the request was sent to the store: the store decided at or after it. */
  sentAtMs: number;
  /** Local clock from which the refusing rule could fit, or the minute's edge if sooner: the entry is over then. */
  untilMs: number;
}

/**
 * Refusals of limit rules answered from memory until the refusing rule could fit again (store
 * clock), so that a caller hammering a rule (30 a minute per address) costs no Redis round trip
 * per refusal. Exact because nothing can make room in that counter before then, on a store whose
 * rule counters only fill (`QuotaStore.rulesOnlyFill`): a rule's refusal charges nothing, a fixed
 * window's count never falls within the window, and a gcra TAT never moves back; a request that
 * matches the same rules with the same values meets the same counter, which refuses it as well.
 * A rule's refusal counts towards no ban (quota/limit-rules.ts), so nothing is lost by not telling
 * Redis about it.
 *
 * Not remembered: a plan's refusal (each is counted towards the ban, local-verdicts.ts), a ban
 * (local-verdicts.ts has those), a slot refusal (a slot frees when a request in flight ends) and
 * anything decided without the store (degraded mode's answers are its own share's).
 *
 * What the answer may not repeat exactly: the plan's fields are as the store last told them (the
 * plan's counters move with the subject's other requests); so may the binding window of the headers
 * and Retry-After be the rule's where, by now, the plan would bind later. The request is refused
 * either way, charged nothing either way.
 */
export class RuleRefusals {
  private readonly entries: LRUCache<string, Refusal>;

  constructor(
    maxEntries: number,
    /** The local clock; `remember`'s `sentAtMs` is read from it. */
    readonly now: () => number = Date.now,
    /**
     * The longest an entry lasts. With leases of rule counters a counter also falls: a lease's
     * give-back. A refusal is final only once no lease's units may be out (quota-script.ts
     * CLOCK's unitsOut), but a holder slower than that grace gives them back later still: its
     * units then reach the next request asked of the store after this, not the minute's end.
     */
    private readonly maxMs = Infinity,
  ) {
    // Each entry's end is checked on the injected clock (`answer`), not the cache's own timer.
    this.entries = new LRUCache({ max: maxEntries });
  }

  /**
   * Remembers `outcome` if a rule refused it, until that rule could fit again. `sentAtMs`: the local
   * clock when the request left, so that the entry ends no later than that moment in the store's
   * time (the store decided after it).
   */
  remember(subject: string, rules: readonly RuleCharge[], outcome: RulesOutcome, sentAtMs: number): void {
    const rule = rules[outcome.refusedBy];
    if (outcome.verdict !== 'limited' || !rule) return;
    const fitsAtMs = ruleReport(rule, outcome.rules[outcome.refusedBy]!, outcome.nowMs).fitsAtMs;
    // No further than the minute's edge either: the plan's fields are as last heard, and past it
    // its fixed windows have rolled, so they would claim a full minute (and a Retry-After to its
    // end) that no longer is. The next such request asks the store again; a day's or a month's
    // edge is a minute's edge too.
    const minuteEndMs = outcome.nowMs - (outcome.nowMs % MINUTE_MS) + MINUTE_MS;
    const untilMs = sentAtMs + Math.min(Math.min(fitsAtMs, minuteEndMs) - outcome.nowMs, this.maxMs);
    if (untilMs <= this.now()) return;
    this.entries.set(keyOf(subject, rules), { rules, outcome, sentAtMs, untilMs });
  }

  /** The remembered refusal of a request of `subject` matching `rules`, as of now (store clock advanced by the local delta), or undefined. */
  answer(subject: string, rules: readonly RuleCharge[]): RulesOutcome | undefined {
    // Asked before every request rules apply to: with nothing remembered, no key is made.
    if (this.entries.size === 0) return undefined;
    const key = keyOf(subject, rules);
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    const nowMs = this.now();
    if (nowMs >= entry.untilMs) {
      this.entries.delete(key);
      return undefined;
    }
    if (!sameLimits(entry.rules, rules)) return undefined;
    const { outcome } = entry;
    return { ...outcome, nowMs: outcome.nowMs + (nowMs - entry.sentAtMs) };
  }
}

/** The subject and each rule's counter (its name and digest), in the request's order: that order names the refusing rule. */
function keyOf(subject: string, rules: readonly RuleCharge[]): string {
  let key = subject;
  for (const rule of rules) key += `\n${rule.name}\n${rule.digest}`;
  return key;
}

/** The same counters under the same limits: after a reload that changed a rule's limit, its counter's name stays but the refusal no longer holds. */
function sameLimits(a: readonly RuleCharge[], b: readonly RuleCharge[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  return a.every((rule, i) => sameRuleLimits(rule, b[i]!));
}
