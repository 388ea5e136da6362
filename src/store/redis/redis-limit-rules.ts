import type { QuotaOutcome } from '../../quota/quota-state.js';
import type { RuleCharge, RuleState } from '../../quota/limit-rules.js';
import type { RulesOutcome } from '../quota-store.js';
import { limitKey } from './redis-keys.js';
import { QUOTA_REPLY_LENGTH } from './quota-script.js';

/** A rule's numbers in the scripts' ARGV (limit-rules-script.ts RULE_ARGS). */
export function ruleArgs(rule: RuleCharge): number[] {
  return [rule.limit, rule.windowMs, rule.gcra ? 1 : 0, rule.intervalUs, rule.burst, rule.cost];
}

export const ruleKeys = (rules: readonly RuleCharge[]) => rules.map((rule) => limitKey(rule.name, rule.digest));

/** One request's rule part of RULES_QUOTA_SCRIPT's reply, from `at` (after its QUOTA_REPLY_LENGTH plan numbers). */
export function rulesAt(reply: number[], at: number, rules: number): { refusedBy: number; rules: RuleState[] } {
  const states: RuleState[] = [];
  for (let i = 0; i < rules; i++)
    states.push({ startMs: Number(reply[at + 1 + 3 * i]), count: Number(reply[at + 2 + 3 * i]), tatUs: Number(reply[at + 3 + 3 * i]) });
  return { refusedBy: Number(reply[at]), rules: states };
}

/**
 * RULES_QUOTA_SCRIPT's keys and per-request arguments for `requests` (each its cost and rules):
 * every counter once in KEYS, each rule naming its index there.
 */
export function rulesCallArgs(quotaKey: string, requests: ReadonlyArray<{ cost: number; rules: readonly RuleCharge[] }>) {
  const keys = [quotaKey];
  const index = new Map<string, number>();
  const args: number[] = [requests.length];
  for (const request of requests) {
    args.push(request.cost, request.rules.length);
    for (const rule of request.rules) {
      const key = limitKey(rule.name, rule.digest);
      let at = index.get(key);
      if (at === undefined) index.set(key, (at = keys.push(key)));
      args.push(at, ...ruleArgs(rule));
    }
  }
  return { keys, args };
}

/** Numbers one request takes in RULES_QUOTA_SCRIPT's reply. */
export const rulesReplyLength = (rules: number) => QUOTA_REPLY_LENGTH + 1 + 3 * rules;

interface ClusterCommands {
  tgRuleReserve(key: string, nowMs: string | number, ...args: number[]): Promise<number[]>;
  tgRuleRelease(key: string, nowMs: string | number, ...args: number[]): Promise<number>;
}

/**
 * Redis Cluster: the rules' counters are in other slots than the consumer's, so no one script sees
 * them all. Each rule is reserved (charged if it fits) in its own slot, at once; then the plan's
 * step runs; then the reservations stay (admitted) or are given back (a rule or the plan refused).
 * All or nothing still: a request is never charged by one part and refused by another, once the
 * give-backs have run. Between the steps other requests see the reserved units as used (they may
 * be refused for units that come back). A gateway that dies between the steps leaves its
 * reservations counted until their window ends (a gcra rule: until its TAT passes): over-counted,
 * never over-admitted (docs/policies.md).
 */
export async function consumeRulesOnCluster(
  commands: ClusterCommands,
  nowArg: () => string | number,
  rules: readonly RuleCharge[],
  plan: () => Promise<QuotaOutcome>,
  peek: () => Promise<QuotaOutcome>,
): Promise<RulesOutcome> {
  const keys = ruleKeys(rules);
  const replies = await Promise.all(rules.map((rule, i) => commands.tgRuleReserve(keys[i]!, nowArg(), ...ruleArgs(rule))));
  const states = replies.map((r) => ({ startMs: Number(r[1]), count: Number(r[2]), tatUs: Number(r[3]) }));
  const giveBack = () =>
    Promise.all(
      rules.map((rule, i) =>
        Number(replies[i]![0]) === 1
          ? commands.tgRuleRelease(keys[i]!, nowArg(), ...ruleArgs(rule), states[i]!.startMs, states[i]!.tatUs)
          : Promise.resolve(0),
      ),
    );
  const refusedBy = replies.findIndex((r) => Number(r[0]) !== 1);
  if (refusedBy >= 0) {
    const [outcome] = await Promise.all([peek(), giveBack()]);
    const before = states.map((state, i) => (Number(replies[i]![0]) === 1 ? uncharged(state, rules[i]!, outcome.nowMs) : state));
    if (outcome.verdict === 'banned') return { ...outcome, rules: before, refusedBy: -1 };
    return { ...outcome, verdict: 'limited', rules: before, refusedBy };
  }
  let outcome: QuotaOutcome;
  try {
    outcome = await plan();
  } catch (err) {
    // The plan's step failed (Redis went away): the reservations go back if they can.
    await giveBack().catch(() => undefined);
    throw err;
  }
  if (outcome.verdict === 'allowed') return { ...outcome, rules: states, refusedBy: -1 };
  await giveBack();
  return { ...outcome, rules: states.map((state, i) => uncharged(state, rules[i]!, outcome.nowMs)), refusedBy: -1 };
}

/** A reserved counter as it was before the reservation: what the headers report once it is given back. */
function uncharged(state: RuleState, rule: RuleCharge, nowMs: number): RuleState {
  const tatUs = rule.gcra ? state.tatUs - rule.cost * rule.intervalUs : state.tatUs;
  // A TAT not ahead of now reads as none (limit-rules.ts ruleCurrent).
  return { startMs: state.startMs, count: state.count - rule.cost, tatUs: tatUs > nowMs * 1000 ? tatUs : 0 };
}
