import { Cluster, type Redis } from 'ioredis';
import type { RedisClient } from './connect.js';
import { subscriptionsOf } from './subscriptions.js';
import type { BanPolicy, Quota } from '../../config/plans-schema.js';
import type { QuotaOutcome, Settlement, Verdict } from '../../quota/quota-state.js';
import type {
  CreditChange,
  CreditResult,
  DegradedAdmissions,
  LeaseGrant,
  LeaseRequest,
  QuotaNotice,
  QuotaStore,
  Recall,
  RecallWait,
  SettleResult,
  RulesOutcome,
  SlotClaim,
} from '../quota-store.js';
import { ruleSubject, type RuleCharge } from '../../quota/limit-rules.js';
import { RULE_RELEASE_SCRIPT, RULE_RESERVE_SCRIPT, RULES_QUOTA_SCRIPT } from './limit-rules-script.js';
import { consumeRulesOnCluster, reserveRuleLease, rulesAt, rulesCallArgs, rulesReplyLength } from './redis-limit-rules.js';
import { RULE_LEASE_SCRIPT } from './rule-lease-script.js';
import type { RuleState } from '../../quota/limit-rules.js';
import {
  CREDITS_SCRIPT,
  LEASE_SCRIPT,
  QUOTA_ARGS_BEFORE_COSTS,
  QUOTA_REPLY_LENGTH,
  QUOTA_SCRIPT,
  SETTLE_SCRIPT,
  UNBAN_SCRIPT,
  USAGE_SCRIPT,
} from './quota-script.js';
import {
  QUOTA_NOTICE_CHANNEL,
  leaseHoldersKey,
  tatMovesKey,
  limitSubject,
  quotaKey,
  quotaSubject,
  reconciledKey,
  settledKey,
  slotsKey,
} from './redis-keys.js';
import { RedisSlotStore } from './redis-slot-store.js';
import { RECONCILE_SCRIPT, RECONCILED_MARKER_MS } from './reconcile-script.js';
import { MULTI_QUOTA_SCRIPT } from './multi-quota-script.js';
import { TurnBatches } from './turn-batches.js';
import { TurnCommands } from './turn-commands.js';
import { ReplicaAcks } from './replica-acks.js';
import { queueWait, type ReplicaWait, type ReplicaWaitListener } from './replica-wait.js';
import type { TurnMark } from './turn-marks.js';
import { gcraMinute } from '../../quota/gcra.js';
import { periodsAt, type Periods } from '../../quota/calendar.js';
import { DEFAULT_USAGE_RETENTION_MS } from '../usage-store.js';
import type { UsagePeriods } from '../../quota/usage-hours.js';

/** The script's verdicts by number (3, recalled, is an answer of its own: toAnswer). */
const VERDICTS: Record<number, Verdict> = { 0: 'allowed', 1: 'limited', 2: 'banned', 4: 'unfunded', 5: 'concurrent' };

interface QuotaCommands {
  tgQuota(key: string, ...args: Array<string | number>): Promise<number[]>;
  tgQuotaSlots(key: string, slots: string, ...args: Array<string | number>): Promise<number[]>;
  tgQuotaUsage(key: string, nowMs: string | number, ...edges: number[]): Promise<number[]>;
  tgUnban(key: string, nowMs: string | number): Promise<number>;
  tgLease(key: string, holders: string, moves: string, ...args: Array<string | number>): Promise<number[]>;
  tgReconcile(key: string, marker: string, ...args: Array<string | number>): Promise<number>;
  tgCredits(key: string, mode: string, amount: number): Promise<number[]>;
  tgSettle(key: string, marker: string, holders: string, moves: string, ...args: Array<string | number>): Promise<number[]>;
  tgRuleReserve(key: string, nowMs: string | number, ...args: number[]): Promise<number[]>;
  tgRuleRelease(key: string, nowMs: string | number, ...args: number[]): Promise<number>;
  tgRuleLease(key: string, nowMs: string | number, ...args: Array<string | number>): Promise<number[]>;
}

/** The quota scripts queued for a turn (TurnCommands), each answered through its callback. */
interface QuotaPipeline {
  tgQuota(key: string, ...args: Array<string | number | ((err: Error | null, reply?: number[]) => void)>): unknown;
  /** With the subject's slots as KEYS[2] (QUOTA_SCRIPT's concurrency slots). */
  tgQuotaSlots(key: string, ...args: Array<string | number | ((err: Error | null, reply?: number[]) => void)>): unknown;
  tgRulesQuota(keys: number, ...args: Array<string | number | ((err: Error | null, reply?: number[]) => void)>): unknown;
  /** Several keys' QUOTA_SCRIPT steps in one call (multi-quota-script.ts). */
  tgQuotaMulti(keys: number, ...args: Array<string | number | ((err: Error | null, reply?: Array<number | Error>) => void)>): unknown;
}

/** Requests of one key decided in one script call at most: bounds the time one call holds Redis. */
const MAX_BATCH = 128;
/**
 * Keys, and requests, decided in one MULTI_QUOTA_SCRIPT call at most: Redis runs nothing else while
 * a script runs, so a turn of many warm keys is split into calls of a bounded length.
 */
const MAX_KEYS_PER_CALL = 32;
const MAX_REQUESTS_PER_CALL = MAX_BATCH;

/** One array of QUOTA_SCRIPT's arguments before the costs, and what they were made from (RedisQuotaStore.quotaArgs). */
interface FixedArgs {
  ban: BanPolicy;
  recall: boolean;
  now: string | number;
  /** The day's memoized periods (calendar.ts) the month edges came from. */
  periods: Periods;
  args: ReadonlyArray<string | number>;
}

/** One key's QUOTA_SCRIPT call, waiting for its turn's calls to be packed (`flushSections`). */
interface Section {
  key: string;
  /** QUOTA_SCRIPT's arguments before the costs: one array for every call under the same limits (`quotaArgs`). */
  fixed: ReadonlyArray<string | number>;
  costs: number[];
  /** The requests it decides: its reply is this many QUOTA_REPLY_LENGTH numbers. */
  requests: number;
  done: (err: Error | null, reply?: number[]) => void;
}

interface Request {
  redisKey: string;
  quota: Quota;
  ban: BanPolicy;
  cost: number;
  batched?: (requests: number) => void;
  /** A refusal while leases are out may be a recall (QUOTA_SCRIPT's `recall`). */
  recall: boolean;
  /** A concurrency slot taken with the windows (QUOTA_SCRIPT's KEYS[2]). */
  slot?: SlotClaim;
}

/** One request's answer from the script: an outcome, or a recall to wait on. */
type Answer = QuotaOutcome | { recalled: Recall };

/** A request matching limit rules (RULES_QUOTA_SCRIPT), and its answer with the rules' counters. */
type RulesRequest = Request & { rules: readonly RuleCharge[] };
interface RulesAnswer {
  answer: Answer;
  refusedBy: number;
  rules: RuleState[];
}

/**
 * Shared counters, exact however many replicas share the Redis: one EVALSHA decides the requests
 * of one key that arrived in one event-loop turn, in their order (turn-batches.ts), so a hot key
 * costs one command per turn, not one per request; a lone request is sent after its turn's I/O,
 * as before. ioredis falls back to EVAL once if the script cache was flushed.
 */
export class RedisQuotaStore implements QuotaStore {
  private readonly commands: QuotaCommands;
  private readonly batches = new TurnBatches<Request, Answer>((requests) => this.decide(requests), MAX_BATCH);
  /** Requests matching limit rules, per key and turn, as `batches` (single server only). */
  private readonly ruleBatches = new TurnBatches<RulesRequest, RulesAnswer>((requests) => this.decideRules(requests), MAX_BATCH);
  /** A single server (not a Cluster): its script calls of one turn are written together (`quotaCall`). */
  private readonly single?: Redis;
  private turn?: Turn;
  /** gateway.yaml quota.waitForReplica, who hears how the WAITs went, and where they go (`waitForReplicas`). */
  private replicaWait?: ReplicaWait & { listener: ReplicaWaitListener; acks: ReplicaAcks };
  /** QUOTA_SCRIPT's arguments before the costs, per quota object (`quotaArgs`). */
  private readonly fixedArgs = new WeakMap<Quota, FixedArgs[]>();
  private stopListening?: () => void;
  readonly slots: RedisSlotStore;
  /** A Cluster reserves rule units and may give them back (redis-limit-rules.ts): a refusal there may not hold. */
  get rulesOnlyFill(): boolean {
    return this.single !== undefined;
  }
  readonly reserveRule?: QuotaStore['reserveRule'];
  /** Once the lease notices' subscription has taken effect (tests wait for it; a lease granted before it ends then). */
  noticesReady: Promise<void> = Promise.resolve();

  /**
   * `testClock` replaces Redis TIME, for tests that run this store and the memory store on one
   * injected clock. Production leaves it out: replicas must share Redis's clock.
   */
  constructor(
    private readonly redis: RedisClient,
    private readonly testClock?: () => number,
    /** How long usage for invoicing is kept (gateway.yaml quota.usage.retentionDays; 0: none is). */
    private readonly usageRetentionMs = DEFAULT_USAGE_RETENTION_MS,
  ) {
    if (!(redis instanceof Cluster)) this.single = redis;
    redis.defineCommand('tgQuota', { numberOfKeys: 1, lua: QUOTA_SCRIPT });
    redis.defineCommand('tgQuotaSlots', { numberOfKeys: 2, lua: QUOTA_SCRIPT });
    redis.defineCommand('tgQuotaUsage', { numberOfKeys: 1, lua: USAGE_SCRIPT });
    redis.defineCommand('tgUnban', { numberOfKeys: 1, lua: UNBAN_SCRIPT });
    redis.defineCommand('tgLease', { numberOfKeys: 3, lua: LEASE_SCRIPT });
    redis.defineCommand('tgReconcile', { numberOfKeys: 2, lua: RECONCILE_SCRIPT });
    redis.defineCommand('tgCredits', { numberOfKeys: 1, lua: CREDITS_SCRIPT });
    redis.defineCommand('tgSettle', { numberOfKeys: 4, lua: SETTLE_SCRIPT });
    // Limit rules (limit-rules-script.ts): one call on a single server; reserve and give back on a Cluster.
    redis.defineCommand('tgRulesQuota', { lua: RULES_QUOTA_SCRIPT });
    redis.defineCommand('tgQuotaMulti', { lua: MULTI_QUOTA_SCRIPT });
    redis.defineCommand('tgRuleReserve', { numberOfKeys: 1, lua: RULE_RESERVE_SCRIPT });
    redis.defineCommand('tgRuleRelease', { numberOfKeys: 1, lua: RULE_RELEASE_SCRIPT });
    redis.defineCommand('tgRuleLease', { numberOfKeys: 1, lua: RULE_LEASE_SCRIPT });
    this.commands = redis as unknown as QuotaCommands;
    // Rule counters' leases only where one script sees a rule's counter with the plan's (rule-leases.ts).
    if (this.single) this.reserveRule = this.leaseRule;
    this.slots = new RedisSlotStore(redis, () => this.nowArg());
  }

  /**
   * From now on each turn's decisions (and each lease grant) are followed by a WAIT for
   * `wait.replicas` replicas before their answers, on a connection of its own (replica-acks.ts):
   * one more round trip per turn, and the answers of the turn wait for it. A decision no replica
   * acknowledged in time is still answered as the master decided (see
   * gateway/unreplicated-writes.ts for why), and told to `listener`. False on a Cluster, where one
   * WAIT would cover one node's writes only: there it is not done.
   */
  waitForReplicas(wait: ReplicaWait, listener: ReplicaWaitListener): boolean {
    if (!this.single) return false;
    this.replicaWait = { ...wait, listener, acks: new ReplicaAcks(this.single, wait, listener.marks) };
    return true;
  }

  /**
   * A request answered "recalled" (units out on leases may be what it lacks) waits for them to come
   * back, then is decided again, finally: counted towards a ban once, and only then.
   */
  consume(
    keyId: string,
    quota: Quota,
    ban: BanPolicy,
    cost = 1,
    batched?: (requests: number) => void,
    recall?: RecallWait,
    slot?: SlotClaim,
  ): Promise<QuotaOutcome> {
    const redisKey = quotaKey(keyId);
    const request: Request = { redisKey, quota, ban, cost, batched, recall: recall !== undefined, slot };
    // Every warm key's request comes this way: one reaction on the batch's answer, no async frame.
    return this.batches
      .add(redisKey, request)
      .then((answer) => ('recalled' in answer ? this.decideAfterRecall(keyId, request, answer.recalled, recall!) : answer));
  }

  /** A request answered "recalled": decided again, finally, once the leased units are back. */
  private async decideAfterRecall(keyId: string, request: Request, recalled: Recall, recall: RecallWait): Promise<QuotaOutcome> {
    await recall(keyId, recalled);
    return (await this.batches.add(request.redisKey, { ...request, recall: false })) as QuotaOutcome;
  }

  /**
   * One key's requests of one turn: one script call per run of requests under the same limits
   * (nearly always one; a plans reload or a key's new quota between two of them makes two), sent
   * in order on one connection, so Redis decides them in arrival order.
   */
  private decide(requests: Request[]): Promise<Answer[]> {
    try {
      const calls: Array<Promise<Answer[]>> = [];
      for (let start = 0, end = 1; start < requests.length; start = end++) {
        while (end < requests.length && sameLimits(requests[end]!, requests[start]!)) end++;
        calls.push(this.call(requests[start]!, start === 0 && end === requests.length ? requests : requests.slice(start, end)));
      }
      // Nearly always one run: its call's promise is the batch's, not one more gathered around it.
      return calls.length === 1 ? calls[0]! : Promise.all(calls).then((outcomes) => outcomes.flat());
    } catch (err) {
      // A fault is the batch's rejection, as from an async function, never a throw in the turn's flush.
      return Promise.reject(err);
    }
  }

  /**
   * A request matching limit rules: not batched (its rules are its own), and never leased; one
   * RULES_QUOTA_SCRIPT call on a single server, reserve-then-commit on a Cluster
   * (redis-limit-rules.ts). A recall (leases of the key out) is waited for as in `consume`.
   */
  async consumeRules(
    keyId: string,
    quota: Quota,
    ban: BanPolicy,
    cost: number,
    rules: readonly RuleCharge[],
    recall?: RecallWait,
  ): Promise<RulesOutcome> {
    if (!this.single) {
      return consumeRulesOnCluster(
        this.commands,
        () => this.nowArg(),
        rules,
        () => this.consume(keyId, quota, ban, cost, undefined, recall),
        // A ban in force answers the request, counted refused in usage as the plan's step counts it.
        async () => ({ ...(await this.peek(keyId, quota, this.usageRetentionMs)), cost }),
      );
    }
    const redisKey = quotaKey(keyId);
    const request: RulesRequest = { redisKey, quota, ban, cost, rules, recall: recall !== undefined };
    let decided = await this.ruleBatches.add(redisKey, request);
    // Recalled for the plan's leases, or for those of the rule that did not fit (rule-leases.ts),
    // then decided again: recalling again, since another part (rules at their limits together)
    // may lack units its leases hold; each part once at most, the last decision final.
    for (let recalls = 0; 'recalled' in decided.answer; recalls++) {
      const refusing = rules[decided.refusedBy];
      await recall!(refusing ? ruleSubject(refusing) : keyId, decided.answer.recalled);
      decided = await this.ruleBatches.add(redisKey, { ...request, recall: recalls < rules.length });
    }
    // The answer is this request's own (decideRules makes one per request): completed, not copied.
    const outcome = decided.answer as RulesOutcome;
    outcome.refusedBy = decided.refusedBy;
    outcome.rules = decided.rules;
    return outcome;
  }

  /** One key's rule requests of one turn: one RULES_QUOTA_SCRIPT call per run under the same limits. */
  private async decideRules(requests: RulesRequest[]): Promise<RulesAnswer[]> {
    const calls: Array<Promise<RulesAnswer[]>> = [];
    for (let start = 0; start < requests.length;) {
      const first = requests[start]!;
      let end = start + 1;
      while (end < requests.length && sameLimits(requests[end]!, first)) end++;
      const run = requests.slice(start, end);
      const { keys, args } = rulesCallArgs(first.redisKey, run);
      const quotaArgs = this.quotaArgs(first.quota, first.ban, first.recall);
      // In the turn's pipeline, as the plan's calls (quotaCall): not behind the last turn's round trip.
      calls.push(
        this.pipelined((pipeline, done) => pipeline.tgRulesQuota(keys.length, ...keys, ...quotaArgs, ...args, done)).then(
          ({ reply, replicated, mark }) => {
            let at = 0;
            const answers = run.map((request) => {
              const decided = toAnswer(reply, at);
              const nowMs = 'recalled' in decided ? decided.recalled.nowMs : decided.nowMs;
              const { refusedBy, rules } = rulesAt(reply, at + QUOTA_REPLY_LENGTH, request.rules, nowMs);
              const answer: RulesAnswer = { answer: decided, refusedBy, rules };
              at += rulesReplyLength(request.rules.length);
              return answer;
            });
            // The plan's decisions, behind the turn's WAIT as those of call(): not those a rule refused
            // (the plan was not asked, nothing of it written). The rules' counters are not kept.
            const planned = answers.filter((a) => a.refusedBy < 0).map((a) => a.answer);
            this.told(replicated, mark, first.redisKey, first.quota, planned);
            return answers;
          },
        ),
      );
      start = end;
    }
    return (await Promise.all(calls)).flat();
  }

  /**
   * QUOTA_SCRIPT's arguments before the costs. The same array while they are the same (a plan's
   * quota object, its ban, the recall flag, the clock argument and the day's periods): not built
   * for every request, and a turn's packed call finds a plan's sections by it (multiArgs).
   * Callers never change it.
   * Matched by the periods, not by the month array: monthArgs keeps one array per periods for the
   * perMonth last asked, so plans with different perMonth in one zone would each miss every time.
   */
  private quotaArgs(quota: Quota, ban: BanPolicy, recall: boolean): ReadonlyArray<string | number> {
    const now = this.nowArg();
    const periods = periodsAt(this.clockMs(), quota.calendar);
    let known = this.fixedArgs.get(quota);
    for (const k of known ?? []) if (k.ban === ban && k.recall === recall && k.now === now && k.periods === periods) return k.args;
    const args = this.buildQuotaArgs(quota, ban, recall, now, this.monthArgs(quota, periods));
    if (!known) this.fixedArgs.set(quota, (known = []));
    // A few at most (recall or not; a test clock's `now` changes on every call): bounded anyway.
    if (known.length >= 4) known.shift();
    known.push({ ban, recall, now, periods, args });
    return args;
  }

  private buildQuotaArgs(
    quota: Quota,
    ban: BanPolicy,
    recall: boolean,
    now: string | number,
    month: readonly number[],
  ): ReadonlyArray<string | number> {
    return [
      quota.perMinute,
      quota.perDay,
      ban.afterRejections,
      ban.window * 1000,
      ban.duration * 1000,
      quota.shadow ? 1 : 0,
      ...gcraArgs(quota),
      now,
      recall ? 1 : 0,
      ...month,
      quota.credits === 'required' ? 1 : 0,
      this.usageRetentionMs,
    ];
  }

  private call({ redisKey, quota, ban, recall, slot }: Request, run: Request[]): Promise<Answer[]> {
    const costs = run.map((request) => request.cost);
    for (const request of run) request.batched?.(run.length);
    // With slots: maxConcurrent and the slots' life, then each request's cost and member.
    const perRequest = slot ? [slot.max, slot.lifeMs, ...run.flatMap((request) => [request.cost, request.slot!.member])] : costs;
    return this.quotaCall(redisKey, slot && slotsKey(quotaSubject(redisKey)!), this.quotaArgs(quota, ban, recall), perRequest).then(
      ({ reply, replicated, mark }) => {
        const answers: Answer[] = new Array<Answer>(run.length);
        for (let i = 0; i < run.length; i++) answers[i] = toAnswer(reply, i * QUOTA_REPLY_LENGTH);
        this.told(replicated, mark, redisKey, quota, answers);
        return answers;
      },
    );
  }

  /** Tells the WAIT's outcome (quotaCall's `replicated`) about a call's plan answers: the units a failover could lose are kept. */
  private told(replicated: boolean | undefined, mark: TurnMark | undefined, redisKey: string, quota: Quota, answers: Answer[]): void {
    if (replicated === undefined || !mark) return;
    const listener = this.replicaWait!.listener;
    if (replicated) return listener.replicated(mark);
    const subject = quotaSubject(redisKey)!;
    for (const answer of answers) if (!('recalled' in answer)) listener.unreplicated(subject, answer, quota, mark);
  }

  /**
   * One script call. On a single server the calls of one turn (one per key that had requests, and
   * one per key that had requests matching limit rules: decideRules) go out together at the turn's
   * end (`pipelined`): one write, sent at once, and in flight beside any earlier one.
   * ioredis's auto-pipelining would also share the write, but it starts a pipeline only after
   * another loop turn (setImmediate) and only once the previous one has been answered, so each
   * turn's decisions queued behind the last turn's round trip: the p99 of a fixed-rate load went
   * up by a Redis round trip and more (README, Performance). A Cluster keeps auto-pipelining: a
   * pipeline there must hold one slot, and it groups the calls by node itself.
   */
  private quotaCall(
    key: string,
    slots: string | undefined,
    fixed: ReadonlyArray<string | number>,
    perRequest: Array<string | number>,
  ): Promise<TurnReply> {
    if (!this.single) {
      const call = slots
        ? this.commands.tgQuotaSlots(key, slots, ...fixed, ...perRequest)
        : this.commands.tgQuota(key, ...fixed, ...perRequest);
      return call.then((reply) => ({ reply }));
    }
    if (slots) return this.pipelined((pipeline, done) => pipeline.tgQuotaSlots(key, slots, ...fixed, ...perRequest, done));
    // No slots: the costs alone, one each.
    const costs = perRequest as number[];
    return this.pipelined((_, done, turn) => turn.sections.push({ key, fixed, costs, requests: costs.length, done }));
  }

  /**
   * One script call queued on this turn's calls (a single server only): `queue` adds it with
   * `done` as its callback. With quota.waitForReplica, `replicated` says whether the turn's WAIT
   * was acknowledged (the answer waits for it).
   */
  private pipelined(
    queue: (pipeline: QuotaPipeline, done: (err: Error | null, reply?: number[]) => void, turn: Turn) => unknown,
  ): Promise<TurnReply> {
    let turn = this.turn;
    if (!turn) {
      const direct = new TurnCommands(this.single!);
      const calls = quotaCallsOn(direct);
      const opened: Turn = (turn = this.turn = { calls, sections: [] });
      // After this turn's flush (turn-batches.ts) has added every key's call.
      queueMicrotask(() => {
        this.turn = undefined;
        flushSections(calls, opened.sections);
        // With quota.waitForReplica, one marker for the whole turn behind its calls, and a WAIT
        // for it on a connection of its own (replica-acks.ts): never one the next turn's calls
        // would queue behind.
        const wait = this.replicaWait;
        if (wait) Object.assign(opened, queueWait(direct, wait.acks, wait.listener.marks));
        direct.send();
      });
    }
    const current = turn;
    return new Promise<TurnReply>((resolve, reject) => {
      const done = (err: Error | null, reply?: number[]) => {
        if (err) return reject(err);
        // Set before the calls are written, so before any reply: with quota.waitForReplica the
        // answers wait for the WAIT; without it they are the reply alone, with no reaction in between.
        if (!current.replicated) return resolve({ reply: reply! });
        current.replicated.then((replicated) => resolve({ reply: reply!, replicated, mark: current.mark }), reject);
      };
      queue(current.calls, done, current);
    });
  }

  async usage(keyId: string, quota?: Quota): Promise<QuotaOutcome> {
    return this.peek(keyId, quota, 0);
  }

  /** USAGE_SCRIPT; with `countBannedMs` (usage retention), a ban it finds in force counts that request refused in usage. */
  private async peek(keyId: string, quota: Quota | undefined, countBannedMs: number): Promise<QuotaOutcome> {
    const { day, month } = periodsAt(this.clockMs(), quota?.calendar);
    return toOutcome(await this.commands.tgQuotaUsage(quotaKey(keyId), this.nowArg(), ...day, ...month, countBannedMs));
  }

  async changeCredits(keyId: string, change: CreditChange): Promise<CreditResult> {
    const [mode, amount] = change.set !== undefined ? ['set', change.set] : change.add !== undefined ? ['add', change.add] : ['show', 0];
    const [applied, before, after] = (await this.commands.tgCredits(quotaKey(keyId), mode, amount)).map(Number);
    return { before: before ?? 0, after: after ?? 0, applied: applied === 1 };
  }

  async unban(keyId: string): Promise<boolean> {
    return (await this.commands.tgUnban(quotaKey(keyId), this.nowArg())) === 1;
  }

  async reserve(keyId: string, quota: Quota, ban: BanPolicy, request: LeaseRequest): Promise<LeaseGrant> {
    // A give-back after a lost connection waits until the master found since has been given the
    // unreplicated grants it lacked (unreplicated-writes.ts): arriving first, it would find no
    // units of its block out on leases there to return, and they would stay counted.
    const wait = this.replicaWait;
    if (wait && request.giveBack > 0) await wait.listener.settled();
    const args = [
      quota.perMinute,
      quota.perDay,
      ban.window * 1000,
      this.nowArg(),
      request.want,
      request.divisor,
      request.minBlock,
      request.giveBack,
      request.giveBackMinuteStartMs,
      request.giveBackDayStartMs,
      ...gcraArgs(quota),
      request.leaseMs,
      request.block ?? 0,
      request.holder,
      request.ends ? 1 : 0,
      request.heldUntilMs,
      ...this.monthArgs(quota),
      request.giveBackMonthStartMs ?? 0,
      this.usageRetentionMs,
      request.giveBackRequests ?? 0,
      request.giveBackNo ?? 0,
      quota.credits === 'required' ? 1 : 0,
      request.giveBackCredits ?? 0,
      request.giveBackCreditEpoch ?? 0,
      request.giveBackHashEpoch ?? 0,
      request.giveBackBlock ?? 0,
      request.cancelFrom ?? 0,
    ];
    if (!wait || !this.single)
      return named(
        GRANT_FIELDS,
        (await this.commands.tgLease(quotaKey(keyId), leaseHoldersKey(keyId), tatMovesKey(keyId), ...args)).map(Number),
      );
    // The grant and its marker written together, as a turn's decisions (`pipelined`); the WAIT
    // follows on a connection of its own (replica-acks.ts).
    const commands = new TurnCommands(this.single);
    const granting = new Promise<number[]>((resolve, reject) =>
      commands.queue('tgLease', [
        quotaKey(keyId),
        leaseHoldersKey(keyId),
        tatMovesKey(keyId),
        ...args,
        (err?: Error | null, reply?: unknown) => (err ? reject(err) : resolve(reply as number[])),
      ]),
    );
    const { mark, replicated: replicating } = queueWait(commands, wait.acks, wait.listener.marks);
    commands.send();
    const [reply, replicated] = await Promise.all([granting, replicating]);
    const grant = named(GRANT_FIELDS, reply.map(Number));
    // The granted units are admitted from memory later: the grant's write is what counts them.
    if (replicated) wait.listener.replicated(mark);
    else {
      if (grant.granted > 0) {
        const units = { verdict: 'allowed' as const, nowMs: grant.nowMs, cost: grant.granted, bannedUntilMs: 0 };
        // Units, no request: the block's requests are counted at its give-back (quota-leases.ts, rule 13).
        wait.listener.unreplicated(keyId, units, quota, mark, 0);
      }
      if (request.giveBack > 0) wait.listener.unreplicatedGiveBack(keyId, request.giveBack, mark);
    }
    return grant;
  }

  /** A rule counter's lease step (rule-lease-script.ts): `reserveRule`, where there is one. */
  private leaseRule(rule: RuleCharge, request: LeaseRequest): Promise<LeaseGrant> {
    return reserveRuleLease(this.commands, this.nowArg(), rule, request);
  }

  async reconcile(subject: string, replicaId: string, batch: DegradedAdmissions): Promise<void> {
    // The batch's calendar decides which day and month are current, as in the quota script.
    const { day, month } = periodsAt(this.clockMs(), batch.calendar);
    await this.commands.tgReconcile(
      quotaKey(subject),
      reconciledKey(subject, replicaId, batch.seq),
      batch.minuteStartMs,
      batch.minuteUnits,
      batch.dayStartMs,
      batch.dayUnits,
      batch.bannedUntilMs,
      RECONCILED_MARKER_MS,
      this.nowArg(),
      batch.monthStartMs ?? 0,
      batch.monthUnits ?? 0,
      ...day,
      ...month,
      this.usageRetentionMs,
      batch.credits ?? 0,
      batch.leasedCredits ?? 0,
      batch.leasedUnits?.minute ?? 0,
      batch.leasedUnits?.day ?? 0,
      batch.leasedUnits?.month ?? 0,
      batch.gcra?.tatUs ?? 0,
      batch.gcra?.toleranceUs ?? 0,
      batch.gcra?.lastUs ?? 0,
      ...(batch.usage ?? []).flatMap((h) => [h.dayStartMs, periodsArg(h), h.hourStartMs, h.admitted, h.refused, h.units, h.credits]),
    );
  }

  async settle(subject: string, quota: Quota, ban: BanPolicy, settlement: Settlement & { id: string }): Promise<SettleResult> {
    const { day, month } = periodsAt(this.clockMs(), quota.calendar);
    const [applied, shortfall, creditBalance] = (
      await this.commands.tgSettle(
        quotaKey(subject),
        settledKey(subject, settlement.id),
        leaseHoldersKey(subject),
        tatMovesKey(subject),
        settlement.reserve,
        settlement.cost,
        settlement.minuteStartMs,
        settlement.dayStartMs,
        settlement.monthStartMs,
        quota.perMonth ?? 0,
        quota.credits === 'required' ? 1 : 0,
        ...gcraArgs(quota).slice(0, 2),
        ban.window * 1000,
        SETTLED_MARKER_MS,
        this.nowArg(),
        ...day,
        ...month,
        this.usageRetentionMs,
        settlement.tatUs ?? 0,
        settlement.admittedAtMs ?? 0,
        gcraArgs(quota)[2]!,
        settlement.admittedMoveNo ?? 0,
      )
    ).map(Number);
    return { applied: applied === 1, shortfall: shortfall ?? 0, creditBalance: creditBalance ?? 0 };
  }

  notices(apply: (notice: QuotaNotice) => void, gap: () => void): void {
    if (this.stopListening) throw new Error('lease notices have a listener already');
    const subscription = subscriptionsOf(this.redis).listen(QUOTA_NOTICE_CHANNEL, {
      message: (message) => {
        const notice = toNotice(message);
        if (notice) apply(notice);
      },
      gap,
    });
    this.stopListening = subscription.stop;
    this.noticesReady = subscription.ready;
  }

  async close(): Promise<void> {
    this.replicaWait?.acks.close();
    this.stopListening?.();
    this.stopListening = undefined;
  }

  private nowArg(): string | number {
    return this.testClock ? this.testClock() : '';
  }

  private clockMs(): number {
    return this.testClock ? this.testClock() : Date.now();
  }

  /**
   * perMonth (0: none) and the day's and month's edges around this replica's clock: the script
   * picks the period Redis's clock is in (calendar.ts). Memoized there: the same array all day.
   */
  private monthArgs(quota: Quota, periods = periodsAt(this.clockMs(), quota.calendar)): readonly number[] {
    const perMonth = quota.perMonth ?? 0;
    let args = monthArgs.get(periods);
    if (args?.[0] !== perMonth) monthArgs.set(periods, (args = [perMonth, ...periods.day, ...periods.month]));
    return args;
  }
}

/** A single server's script calls of one turn, written together (RedisQuotaStore.pipelined). */
interface Turn {
  /** Where its calls are queued (TurnCommands'). */
  calls: QuotaPipeline;
  replicated?: Promise<boolean>;
  mark?: TurnMark;
  /** The plain QUOTA_SCRIPT calls of the turn, packed into few calls at its end. */
  sections: Section[];
}

/** The quota scripts' calls of one turn, queued on `commands` (written at the turn's end by its `send`). */
function quotaCallsOn(commands: TurnCommands): QuotaPipeline {
  return {
    tgQuota: (...args) => commands.queue('tgQuota', args),
    tgQuotaSlots: (...args) => commands.queue('tgQuotaSlots', args),
    tgRulesQuota: (...args) => commands.queue('tgRulesQuota', args),
    tgQuotaMulti: (...args) => commands.queue('tgQuotaMulti', args),
  };
}

/**
 * Queues a turn's QUOTA_SCRIPT calls: several keys in one MULTI_QUOTA_SCRIPT call (at most
 * MAX_KEYS_PER_CALL keys and MAX_REQUESTS_PER_CALL requests), a lone one as QUOTA_SCRIPT. Each
 * section is told its own part of the reply, or its own error; an error of the whole call (a
 * connection lost, a timeout) is each of its sections'.
 */
function flushSections(pipeline: QuotaPipeline, sections: Section[]): void {
  for (let start = 0; start < sections.length;) {
    let end = start + 1;
    let requests = sections[start]!.requests;
    while (end < sections.length && end - start < MAX_KEYS_PER_CALL && requests + sections[end]!.requests <= MAX_REQUESTS_PER_CALL) {
      requests += sections[end]!.requests;
      end++;
    }
    const pack = sections.slice(start, end);
    start = end;
    if (pack.length === 1) {
      const { key, fixed, costs, done } = pack[0]!;
      pipeline.tgQuota(key, ...fixed, ...costs, done);
      continue;
    }
    const keys = pack.map((section) => section.key);
    pipeline.tgQuotaMulti(keys.length, ...keys, ...multiArgs(pack), (err, reply) => {
      let at = 0;
      for (const section of pack) {
        if (err) {
          section.done(err);
          continue;
        }
        // A section's error is one element in its place (multi-quota-script.ts); a reply's first is a number.
        const first = reply![at];
        if (first instanceof Error) {
          at++;
          section.done(first);
        } else section.done(null, reply!.slice(at, (at += section.requests * QUOTA_REPLY_LENGTH)) as number[]);
      }
    });
  }
}

/**
 * MULTI_QUOTA_SCRIPT's ARGV for a pack of sections: each plan's fixed arguments once (sections
 * whose QUOTA_SCRIPT arguments before the costs are equal share one), then per section its plan's
 * number, its number of costs and the costs.
 */
function multiArgs(pack: Section[]): Array<string | number> {
  const plans: Array<ReadonlyArray<string | number>> = [];
  const sections: Array<string | number> = [];
  for (const { fixed, costs } of pack) {
    // Nearly always the same array (quotaArgs); equal arguments in another array share it too.
    let plan = plans.indexOf(fixed);
    if (plan < 0) plan = plans.findIndex((known) => samePlan(known, fixed));
    if (plan < 0) plan = plans.push(fixed) - 1;
    sections.push(plan + 1, costs.length);
    for (const cost of costs) sections.push(cost);
  }
  const argv: Array<string | number> = [plans.length];
  for (const fixed of plans) for (let i = 0; i < QUOTA_ARGS_BEFORE_COSTS; i++) argv.push(fixed[i]!);
  for (const arg of sections) argv.push(arg);
  return argv;
}

/** Whether two QUOTA_SCRIPT calls' arguments agree before their costs. */
function samePlan(a: ReadonlyArray<string | number>, b: ReadonlyArray<string | number>): boolean {
  for (let i = 0; i < QUOTA_ARGS_BEFORE_COSTS; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** How long a settlement's marker is kept: far longer than its retries last (seconds), short enough that one marker per settled request stays cheap. */
const SETTLED_MARKER_MS = 10 * 60_000;

/** A usage day's 'p' field (quota-script.ts, usagePeriods): its end and its month window. */
function periodsArg(p: UsagePeriods): string {
  return `${p.dayEndMs} ${p.monthStartMs} ${p.monthEndMs}`;
}

/** The script's month arguments per memoized periods (calendar.ts), for the perMonth last used with them. */
const monthArgs = new WeakMap<Periods, readonly number[]>();

/** Whether two requests are decided under the same windows and ban (the script's shared arguments). */
function sameLimits(a: Request, b: Request): boolean {
  if (a.recall !== b.recall) return false;
  if (a.slot?.max !== b.slot?.max || a.slot?.lifeMs !== b.slot?.lifeMs) return false;
  if (a.quota === b.quota && a.ban === b.ban) return true;
  const [q, r] = [a.quota, b.quota];
  return (
    q.perMinute === r.perMinute &&
    q.perDay === r.perDay &&
    q.perMonth === r.perMonth &&
    q.calendar?.timeZone === r.calendar?.timeZone &&
    q.calendar?.anchorDay === r.calendar?.anchorDay &&
    !q.shadow === !r.shadow &&
    q.credits === r.credits &&
    q.algorithm === r.algorithm &&
    q.burst === r.burst &&
    a.ban.afterRejections === b.ban.afterRejections &&
    a.ban.window === b.ban.window &&
    a.ban.duration === b.ban.duration
  );
}

/** gcra flag and the minute's interval and burst, from the one definition (gcra.ts; the day is counted). */
function gcraArgs(quota: Quota): number[] {
  if (quota.algorithm !== 'gcra') return [0, 0, 0];
  const minute = gcraMinute(quota);
  return [1, minute.intervalUs, minute.burst];
}

/** One script call's reply in a turn, and, with quota.waitForReplica, how its WAIT went and its turn's mark. */
interface TurnReply {
  reply: number[];
  replicated?: boolean;
  mark?: TurnMark;
}

/** One request's answer: the script's reply from `at` on (QUOTA_REPLY_LENGTH numbers; verdict 3: recalled). */
function toAnswer(reply: number[], at: number): Answer {
  if (Number(reply[at]) !== 3) return toOutcome(reply, at);
  return { recalled: { seq: Number(reply[at + 10]), leasedUntilMs: Number(reply[at + 11]), nowMs: Number(reply[at + 4]) } };
}

/** The outcome of one request: the script's reply from `at` on (QUOTA_REPLY_LENGTH numbers). */
function toOutcome(reply: number[], at = 0): QuotaOutcome {
  const field = (i: number, missing: number) => Number(reply[at + i] ?? missing);
  const seq = field(10, 0);
  const moveNo = field(12, 0);
  return {
    ...(seq > 0 && { seq }),
    ...(moveNo > 0 && { moveNo }),
    verdict: VERDICTS[field(0, 1)] ?? 'limited',
    minuteCount: field(1, 0),
    dayCount: field(2, 0),
    rejections: field(3, 0),
    nowMs: field(4, 0),
    bannedUntilMs: field(5, 0),
    cost: field(6, 1),
    minuteTatUs: field(7, 0),
    monthCount: field(8, 0),
    creditBalance: field(9, 0),
  };
}

/**
 * A notice as quota-script.ts publishes it: the quota key, then numbers; undefined if not one.
 * Notices of a version without months or recalls (8 numbers) are not read: the documented upgrade
 * (docs/quota-leases.md) turns leases off while versions are mixed.
 */
function toNotice(message: string): QuotaNotice | undefined {
  const [redisKey, ...fields] = message.split(' ');
  const subject = quotaSubject(redisKey ?? '') ?? limitSubject(redisKey ?? '');
  const numbers = fields.map(Number);
  const extra = numbers.length - NOTICE_FIELDS.length;
  const known = extra === 0 || extra === RECALL_FIELDS || extra === RECALL_FIELDS + 1;
  if (subject === undefined || !known || !numbers.every(Number.isFinite)) return undefined;
  const notice: QuotaNotice = { subject, ...named(NOTICE_FIELDS, numbers) };
  if (extra > 0) {
    notice.leasedUntilMs = numbers[NOTICE_FIELDS.length]!;
    notice.recall = numbers[NOTICE_FIELDS.length + 1] === 1;
  }
  if (extra > RECALL_FIELDS) notice.creditBalance = numbers[NOTICE_FIELDS.length + RECALL_FIELDS]!;
  return notice;
}

/** LEASE_SCRIPT's reply and a notice's numbers, in the order quota-script.ts writes them. */
const GRANT_FIELDS = [
  'granted',
  'minuteStartMs',
  'dayStartMs',
  'nowMs',
  'minuteCount',
  'dayCount',
  'minuteTatUs',
  'seq',
  'monthStartMs',
  'monthCount',
  'creditBalance',
  'creditEpoch',
  'hashEpoch',
] as const;
const NOTICE_FIELDS = [
  'seq',
  'minuteStartMs',
  'minuteCount',
  'dayStartMs',
  'dayCount',
  'minuteTatUs',
  'bannedUntilMs',
  'nowMs',
  'monthStartMs',
  'monthCount',
] as const;
/** After those: leasedUntilMs and the recall flag (then the credit balance, quota-leases.ts rule 14). */
const RECALL_FIELDS = 2;

function named<K extends string>(names: readonly K[], values: number[]): Record<K, number> {
  return Object.fromEntries(names.map((name, i) => [name, values[i] ?? 0])) as Record<K, number>;
}
