import type { QuotaOutcome } from '../../quota/quota-state.js';
import type { RuleCharge, RuleState } from '../../quota/limit-rules.js';
import type { LeaseGrant, LeaseRequest, RulesOutcome } from '../quota-store.js';
import { limitKey } from './redis-keys.js';
import { QUOTA_REPLY_LENGTH } from './quota-script.js';

/** A rule's numbers in the scripts' ARGV (limit-rules-script.ts RULE_ARGS). */
export function ruleArgs(rule: RuleCharge): number[] {
  return [rule.limit, rule.windowMs, rule.gcra ? 1 : 0, rule.intervalUs, rule.burst, rule.cost];
}

export const ruleKeys = (rules: readonly RuleCharge[]) => rules.map(ruleKey);

const ruleKeysOf = new WeakMap<RuleCharge, string>();

/** A charge's counter key, made once per charge (gateway/limit-rules.ts keeps one object per rule and values). */
function ruleKey(rule: RuleCharge): string {
  let key = ruleKeysOf.get(rule);
  if (key === undefined) ruleKeysOf.set(rule, (key = limitKey(rule.name, rule.digest)));
  return key;
}

const packedArgsOf = new WeakMap<RuleCharge, string>();

/** A rule's RULE_ARGS numbers as RULES_QUOTA_SCRIPT takes them: one argument, made once per charge. */
function packedArgs(rule: RuleCharge): string {
  let packed = packedArgsOf.get(rule);
  if (packed === undefined) packedArgsOf.set(rule, (packed = ruleArgs(rule).join(' ')));
  return packed;
}

/**
 * One request's rule part of RULES_QUOTA_SCRIPT's reply, from `at` (after its QUOTA_REPLY_LENGTH
 * plan numbers, decided at `nowMs`): each counter's count and TAT; its window is the current one.
 */
export function rulesAt(
  reply: number[],
  at: number,
  rules: readonly RuleCharge[],
  nowMs: number,
): { refusedBy: number; rules: RuleState[] } {
  const states: RuleState[] = [];
  for (let i = 0; i < rules.length; i++) {
    const startMs = nowMs - (nowMs % rules[i]!.windowMs);
    states.push({ startMs, count: Number(reply[at + 1 + 2 * i]), tatUs: Number(reply[at + 2 + 2 * i]) });
  }
  return { refusedBy: Number(reply[at]), rules: states };
}

/**
 * RULES_QUOTA_SCRIPT's keys and arguments for `requests` (each its cost and rules): every counter
 * once in KEYS, every rule once with its numbers (a request's charges are the same objects from
 * one request to the next: limit-rules.ts remembers them), each request naming its rules there.
 */
export function rulesCallArgs(quotaKey: string, requests: ReadonlyArray<{ cost: number; rules: readonly RuleCharge[] }>) {
  const keys = [quotaKey];
  const keyAt = new Map<string, number>();
  const ruleAt = new Map<RuleCharge, number>();
  const rules: Array<number | string> = [];
  const perRequest: number[] = [];
  for (const request of requests) {
    perRequest.push(request.cost, request.rules.length);
    for (const rule of request.rules) {
      let r = ruleAt.get(rule);
      if (r === undefined) {
        const key = ruleKey(rule);
        let at = keyAt.get(key);
        if (at === undefined) keyAt.set(key, (at = keys.push(key)));
        ruleAt.set(rule, (r = ruleAt.size + 1));
        rules.push(at, packedArgs(rule));
      }
      perRequest.push(r);
    }
  }
  return { keys, args: [requests.length, ruleAt.size, ...rules, ...perRequest] };
}

/** Numbers one request takes in RULES_QUOTA_SCRIPT's reply. */
export const rulesReplyLength = (rules: number) => QUOTA_REPLY_LENGTH + 1 + 2 * rules;

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

/**
 * RULE_LEASE_SCRIPT (rule-lease-script.ts) for a rule counter's lease: its give-back, then a block;
 * the reply as a plan's LeaseGrant whose window is the rule's (`windowMs`; both counts the rule's).
 */
export async function reserveRuleLease(
  commands: { tgRuleLease(key: string, nowMs: string | number, ...args: Array<string | number>): Promise<number[]> },
  nowArg: string | number,
  rule: RuleCharge,
  request: LeaseRequest,
): Promise<LeaseGrant> {
  const [granted, minuteStartMs, dayStartMs, nowMs, count, seq, epoch] = (
    await commands.tgRuleLease(
      ruleKey(rule),
      nowArg,
      ...ruleArgs(rule),
      request.want,
      request.divisor,
      request.minBlock,
      request.leaseMs,
      request.giveBack,
      request.giveBackMinuteStartMs,
      request.holder,
      request.ends ? 1 : 0,
      request.heldUntilMs,
      request.giveBackNo ?? 0,
      // The counter's epoch at the grant rides where a credit balance's does (quota-leases.ts keeps it per block).
      request.giveBackCreditEpoch ?? 0,
      request.block ?? 0,
      request.cancelFrom ?? 0,
    )
  ).map(Number) as [number, number, number, number, number, number, number];
  return {
    granted,
    minuteStartMs,
    dayStartMs,
    nowMs,
    minuteCount: count,
    dayCount: count,
    minuteTatUs: 0,
    seq,
    windowMs: rule.windowMs,
    creditEpoch: epoch,
  };
}
