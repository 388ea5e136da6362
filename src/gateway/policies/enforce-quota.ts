import type { BanPolicy, PlansConfig, Quota } from '../../config/plans-schema.js';
import type { ErrorCode } from '../../errors/registry.js';
import type { Logger } from '../../observability/log.js';
import type { Metrics } from '../../observability/metrics.js';
import { quotaFor } from '../../quota/quota-for.js';
import { quotaSubject } from '../../quota/quota-subject.js';
import type { QuotaLeases } from '../../quota/quota-leases.js';
import { RuleLeases } from '../../quota/rule-leases.js';
import type { QuotaOutcome } from '../../quota/quota-state.js';
import { rateLimitHeaders, retryAfterSeconds, undecidedHeaders } from '../../quota/rate-limit-headers.js';
import type { QuotaStore, RecallWait, RulesOutcome, SlotClaim, SlotStore } from '../../store/quota-store.js';
import { isRuleSubject, type RuleCharge } from '../../quota/limit-rules.js';
import { rulesHeaders } from '../../quota/rule-headers.js';
import type { ProxyTrust } from '../../http/proxy-trust.js';
import type { LimitRules } from '../limit-rules.js';
import { commandTimedOut, isDataError, type StoreHealth } from '../../store/store-health.js';
import { LaterRedisWait, redisWaitLeftMs, waitOnRedis } from '../redis-wait.js';
import { CONTINUE, reject, type Decision, type Policy, type RequestContext } from '../context.js';
import { releaseWhenAnswerEnds, type ConcurrencySlots } from '../concurrency-slots.js';
import type { DegradedMode } from '../degraded-mode.js';
import type { LocalVerdicts } from '../local-verdicts.js';
import type { RuleRefusals } from '../rule-refusals.js';
import type { RouteCosts } from '../route-costs.js';
import type { ReportedCost } from '../../policies/reported-cost/reported-cost-schema.js';
import { CostReservation, type ReservationDeps } from '../reported-cost/cost-reservation.js';
import { pathOf } from '../route-rules.js';
import { withRuleSlots } from '../rule-slots.js';

export interface QuotaDeps {
  store: QuotaStore;
  health: StoreHealth;
  plans: () => PlansConfig;
  /** gateway.yaml routes.costs as of now (hot-reloaded): the units a request consumes. */
  costs: () => RouteCosts;
  local: LocalVerdicts;
  /** Limit rules' refusals, answered here until the rule could fit again; absent where a store's refusal may not hold (a Cluster). */
  ruleRefusals?: RuleRefusals;
  /** Quota leases (gateway.yaml quota.leases): hot keys far from their limits admitted here, exactly. */
  leases?: QuotaLeases;
  /** Leases of limit rules' counters (with `leases`, on one Redis server): hot rule counters admitted here too. */
  ruleLeases?: RuleLeases;
  /** Used while the shared store is unreachable (gateway.yaml quota.onRedisFailure). */
  degraded: DegradedMode;
  /**
   * Most decisions this replica waits on the store for at once (gateway.yaml
   * quota.maxPendingDecisions); one more is shed with 503 and Retry-After, not counted locally.
   */
  maxPending: number;
  /** redis.commandTimeoutMs: a request's waits on Redis share one (redis-wait.ts). */
  commandTimeoutMs: number;
  /** This replica's concurrency slots (maxConcurrent): named, renewed and given back there. */
  slots: ConcurrencySlots;
  metrics: Metrics;
  logger: Logger;
  /** Settles the reservations of costs the upstream reports (absent: they stand as reserved). */
  reservations?: ReservationDeps;
  /** gateway.yaml `limits` as of now (hot): the rules decided with the plan (limit-rules.ts); absent: none. */
  limits?: () => LimitRules;
  /** The one client address the rules' `client.*` read. */
  proxyTrust?: ProxyTrust;
}

type Source = 'store' | 'local_cache' | 'lease' | 'fallback';

/** One request's quota step: what every way of deciding it needs. */
interface QuotaStep {
  ctx: RequestContext;
  quota: Quota;
  ban: BanPolicy;
  /** The key, or its owner under a `scope: owner` plan (quota-subject.ts). */
  subject: string;
  /** Units asked for: the route's cost and what the configured policies added. */
  cost: number;
  /** The cost the upstream reports (the route's rule, else the service's): `cost` is its reservation. */
  reported?: ReportedCost;
  /** The limit rules it matches, decided with the plan, all or nothing (from leases of all, or in the store). */
  rules?: readonly RuleCharge[];
  /** Under a quota with maxConcurrent: the slot the request takes with its windows. */
  slot?: SlotClaim;
}

/**
 * Both quota windows of the authenticated key, in one atomic store decision for the route's cost
 * in units. Sets the rate-limit headers on the response whatever happens next (proxied 2xx,
 * backend 4xx, 429, 502/504).
 */
export function enforceQuota(deps: QuotaDeps): Policy {
  const { local, leases, metrics } = deps;
  const pending = { count: 0 };
  // With leases, a request that does not fit while units are out on them waits for their recall.
  const recall: RecallWait | undefined =
    leases &&
    ((subject, recalled) => {
      metrics.quotaRecalls.inc();
      // A rule counter's recall is heard by the rules' leases (rule-leases.ts).
      const recalling = deps.ruleLeases && isRuleSubject(subject) ? deps.ruleLeases.leases : leases;
      return recalling.recalled(subject, recalled).then((heard) => {
        if (!heard) metrics.quotaRecallsUnanswered.inc();
      });
    });
  return (ctx) => {
    const key = ctx.consumer!;
    const plans = deps.plans();
    const quota = quotaFor(key, plans);
    if (!quota) {
      deps.logger.error({ keyId: key.id, plan: key.plan }, 'key has a plan that plans.yaml does not define');
      return reject('plan_not_configured');
    }
    // The key's own windows, or its owner's under a `scope: owner` plan.
    const subject = quotaSubject(key, quota);
    // Only bans are answered from memory: every refusal short of one is counted in the store, so
    // the ban comes at the configured count on any number of replicas (local-verdicts.ts).
    const cached = local.answer(subject);
    if (cached) return judge(ctx, deps, quota, cached, 'local_cache');
    // The route's cost, and what the configured policies added (user-policies/phases.ts).
    const rule = deps.costs().ruleOf(ctx.req.method ?? 'GET', pathOf(ctx.req.url), ctx.route?.service.config.cost);
    const reported = typeof rule === 'number' ? undefined : rule;
    const cost = (typeof rule === 'number' ? rule : rule.reserve) + (ctx.addedCost ?? 0);
    // A concurrency slot is taken in the same step as the windows (docs/policies.md, maxConcurrent).
    const slot = quota.maxConcurrent === undefined ? undefined : deps.slots.claim(quota.maxConcurrent);
    const step: QuotaStep = { ctx, quota, ban: plans.ban, subject, cost, reported, slot };
    const limits = deps.limits?.().forRequest(ctx, deps.proxyTrust!);
    if (limits && 'missing' in limits) {
      const { rule: name, attribute } = limits.missing;
      metrics.limitRuleDecisions.inc({ rule: name, decision: 'refused_missing' });
      return reject('limit_attribute_missing', `The limit rule "${name}" counts requests by ${attribute}, which this request lacks.`);
    }
    // A request its rules apply to is decided with them: from leases of all (decide), or in Redis.
    if (limits?.charges.length) {
      step.rules = limits.charges;
      // A rule that refused these values refuses them until it could fit (rule-refusals.ts): no
      // round trip, and no rule slot taken only to be given back.
      const refused = deps.ruleRefusals?.answer(subject, limits.charges);
      if (refused) return judge(ctx, deps, quota, refused, 'local_cache', step);
    }
    // A rule's maxConcurrent: its slots are taken before the quota step, given back if it refuses.
    if (limits?.slots.length) return withRuleSlots(ctx, deps, limits.slots, { subject, quota }, () => decide(step, deps, recall, pending));
    return decide(step, deps, recall, pending);
  };
}

/** The quota step proper: the failure mode, the shared store, or a lease of it. */
function decide(
  step: QuotaStep,
  deps: QuotaDeps,
  recall: RecallWait | undefined,
  pending: { count: number },
): Decision | Promise<Decision> {
  const { ctx, quota, ban, subject, cost, slot } = step;
  if (!deps.health.shouldTry()) return degrade(step, deps);
  if (step.rules) {
    const leased = deps.ruleLeases && !slot ? fromRuleLeases(step, deps.ruleLeases, deps.leases) : undefined;
    return leased ? judge(ctx, deps, quota, leased, 'lease', step) : fromStore(step, deps, recall, pending);
  }
  // Units this replica reserved in Redis for a hot key (quota-leases.ts): no round trip; or,
  // while its own ask for them is on its way, its answer (rule 11). A quota with credits leases
  // them too (rule 14). A quota with maxConcurrent takes no lease: a leased admission would take
  // no slot.
  const leased = slot ? undefined : deps.leases?.admit(subject, quota, ban, cost, ctx);
  if (leased instanceof Promise) {
    // A wait on Redis (the ask's answer): after the key record's read, within what is left of its
    // time; with none left, given up at once (the ask's answer, when it comes, takes nothing for it).
    leased.catch(() => undefined);
    return waitOnRedis(ctx, deps.commandTimeoutMs, () => leased).then(
      (outcome) => (outcome ? judge(ctx, deps, quota, outcome, 'lease', step) : fromStore(step, deps, recall, pending)),
      (err: unknown) => storeFailed(step, deps, err),
    );
  }
  if (leased) return judge(ctx, deps, quota, leased, 'lease', step);
  return fromStore(step, deps, recall, pending);
}

/**
 * A request with limit rules, admitted here when this replica's leases of the plan and of every
 * rule's counter each cover their cost (rule-leases.ts): all taken in this turn, or none, and the
 * store decides as without leases. Every leasable rule's counter is counted (so a hot one asks for
 * a block) whatever the others hold.
 */
function fromRuleLeases(step: QuotaStep, ruleLeases: RuleLeases, leases: QuotaLeases | undefined): RulesOutcome | undefined {
  const rules = step.rules!;
  if (!leases || !rules.every(RuleLeases.leasable)) return undefined;
  let covered = true;
  for (const rule of rules) if (!ruleLeases.covers(rule)) covered = false;
  if (!leases.covers(step.subject, step.quota, step.ban, step.cost) || !covered) return undefined;
  const outcome = leases.take(step.subject, step.cost) as RulesOutcome;
  // The rules' windows as of the plan's clock: one moment for every header of the answer.
  outcome.rules = rules.map((rule) => ruleLeases.take(rule, outcome.nowMs));
  outcome.refusedBy = -1;
  return outcome;
}

/** The shared store decides (one round trip), after the recall of leased units when `recall` is given and they are what the request lacks. */
function fromStore(
  step: QuotaStep,
  deps: QuotaDeps,
  recall: RecallWait | undefined,
  pending: { count: number },
): Decision | Promise<Decision> {
  const { ctx, quota, ban, subject, cost, slot } = step;
  const { store, health, local, metrics } = deps;
  const key = ctx.consumer!;
  // A replica too busy to hear Redis in time answers less, not inexactly: shed, keep the promise.
  if (pending.count >= deps.maxPending) return shed(step, deps, 'pending');
  // After the key record's read or a lease ask, the decision has what is left of their time on
  // Redis (redis-wait.ts); none left: not sent, failed as a command that timed out.
  const left = redisWaitLeftMs(ctx, deps.commandTimeoutMs);
  if (left !== undefined && left <= 0) {
    ctx.redisWaitOver = true;
    return storeFailed(step, deps, commandTimedOut());
  }
  // A slot taken alone, then the rules and the plan (consumeRulesWithSlot): two waits on Redis,
  // which share one timeout even when no earlier wait began it.
  const twoCalls = step.rules !== undefined && slot !== undefined && store.slots !== undefined;
  if (left === undefined && twoCalls) ctx.redisWaitSinceMs = performance.now();
  const later = left !== undefined ? new LaterRedisWait(ctx, left) : twoCalls ? new LaterRedisWait(ctx, deps.commandTimeoutMs) : undefined;
  pending.count++;
  const startedMs = performance.now();
  const sentAtMs = step.rules && deps.ruleRefusals ? deps.ruleRefusals.now() : 0;
  const span = ctx.trace?.storeCall('tollgate quota decision', key.id);
  const batched = span && ((requests: number) => span.setAttribute('tollgate.quota.batch_size', requests));
  const recallFor = later && recall ? later.recall(recall) : recall;
  const deciding = step.rules ? consumeRules(store, step, recallFor) : store.consume(subject, quota, ban, cost, batched, recallFor, slot);
  const decided = later ? later.bound(deciding) : deciding;
  const slots = store.slots;
  if (later && slot && slots) {
    // Granted with the request after it gave up (redis-wait.ts): nobody holds the slot, it goes back at once.
    deciding.then(
      (outcome) => {
        if (ctx.redisWaitOver && outcome.verdict === 'allowed') slots.release(subject, [slot.member]).catch(() => undefined);
      },
      () => undefined,
    );
  }
  return decided.then(
    (outcome) => {
      pending.count--;
      // Guarded here too: the attributes object is not made for a request nobody traces.
      if (span) ctx.trace?.endStoreCall(span, { 'tollgate.quota.verdict': outcome.verdict, 'tollgate.quota.cost': cost });
      metrics.redisSeconds.observe({ operation: 'quota' }, (performance.now() - startedMs) / 1000);
      health.succeeded();
      // A ban begins at the request that earned it; the requests decided after it in the same
      // script call (turn-batches.ts) report the same ban, which this replica knows by then.
      const newBan =
        outcome.verdict === 'banned' &&
        outcome.bannedUntilMs - outcome.nowMs === ban.duration * 1000 &&
        local.answer(subject)?.bannedUntilMs !== outcome.bannedUntilMs;
      local.remember(subject, outcome);
      if (step.rules && sentAtMs) deps.ruleRefusals?.remember(subject, step.rules, outcome as RulesOutcome, sentAtMs);
      deps.degraded.heard(subject, outcome);
      // A rule's refusal says nothing of the plan's room: leases go on.
      if (outcome.verdict !== 'allowed' && !((outcome as RulesOutcome).refusedBy >= 0)) deps.leases?.refused(subject);
      if (newBan) metrics.bans.inc({ plan: key.plan });
      if (slot && store.slots && outcome.verdict === 'allowed') holdSlot(step, deps, store.slots);
      // Units this replica holds on a lease of the key are left too (quota-leases.ts, rule 6).
      const told = deps.leases ? deps.leases.told(subject, outcome) : outcome;
      // A slot refused before the rules were asked (consumeRules): no rule has a state to tell.
      return judge(ctx, deps, quota, told, 'store', outcome.verdict === 'concurrent' ? { ...step, rules: undefined } : step);
    },
    (err: unknown) => {
      pending.count--;
      ctx.trace?.endStoreCall(span, { 'tollgate.quota.cost': cost }, 'store_unavailable');
      return storeFailed(step, deps, err);
    },
  );
}

/**
 * A request whose store call failed (or the lease ask it waited for: quota-leases.ts, rule 11),
 * after one command timeout at most: decided without Redis now, never sent for another.
 */
function storeFailed(step: QuotaStep, deps: QuotaDeps, err: unknown): Decision | Promise<Decision> {
  deps.metrics.redisErrors.inc({ operation: 'quota' });
  // Redis answered, about this key's data: a fault of this request (the chain's 500), not an
  // outage that would send every key to local counting (store-health.ts isDataError).
  if (isDataError(err)) throw err;
  // A timeout that is no outage (our own stalled event loop, or a Redis still answering,
  // late: store-health.ts): the script may well have counted this request, and local
  // counting would admit past the limit. Shed it; the next request asks Redis again.
  if (!deps.health.failed(err)) return shed(step, deps, 'timeout');
  return degrade(step, deps);
}

/**
 * A request matching limit rules (RULES_QUOTA_SCRIPT keeps no slots): under maxConcurrent its slot
 * is taken alone first, one more round trip, and given back at once if the rules or the plan refuse.
 */
function consumeRules(store: QuotaStore, step: QuotaStep, recall: RecallWait | undefined): Promise<QuotaOutcome> {
  const { subject, quota, ban, cost, rules, slot } = step;
  // Without a slot, the store's promise itself: no async frame of its own per request.
  if (!slot || !store.slots) return store.consumeRules(subject, quota, ban, cost, rules!, recall);
  return consumeRulesWithSlot(store, step, recall);
}

async function consumeRulesWithSlot(store: QuotaStore, step: QuotaStep, recall: RecallWait | undefined): Promise<QuotaOutcome> {
  const { subject, quota, ban, cost, rules, slot } = step;
  if (slot && store.slots && !(await store.slots.take(subject, slot))) {
    return { ...(await store.usage(subject, quota)), verdict: 'concurrent', cost };
  }
  // Its time on Redis ran out while the slot was taken (redis-wait.ts): the slot goes back, nothing is decided.
  if (step.ctx.redisWaitOver) {
    if (slot && store.slots) void store.slots.release(subject, [slot.member]).catch(() => undefined);
    throw commandTimedOut();
  }
  const outcome = await store.consumeRules(subject, quota, ban, cost, rules!, recall);
  if (slot && store.slots && outcome.verdict !== 'allowed') await store.slots.release(subject, [slot.member]);
  return outcome;
}

/**
 * The slot the store granted with the request: given back once, when its answer ends or its client
 * goes (the response's 'close': also an upstream error, a timeout, an aborted body, the end of a
 * WebSocket tunnel), or at once if the client went while the store decided.
 */
function holdSlot(step: QuotaStep, deps: QuotaDeps, store: SlotStore): void {
  const { ctx, subject, slot } = step;
  releaseWhenAnswerEnds(ctx.res, deps.slots.hold(store, subject, slot!, ctx.consumer!.plan));
}

/** The code of each refusal that is not the windows' own. */
const REFUSALS: Partial<Record<QuotaOutcome['verdict'], ErrorCode>> = {
  banned: 'api_key_banned',
  concurrent: 'too_many_concurrent_requests',
};

/**
 * `step`, for a decision of the shared store (or a lease of it): an admitted request whose cost
 * its upstream reports holds a reservation, settled through the store once its answer is over
 * (reported-cost/cost-reservation.ts). Decided without the store (degraded), it stands as reserved.
 */
function judge(ctx: RequestContext, deps: QuotaDeps, quota: Quota, outcome: QuotaOutcome, source: Source, step?: QuotaStep): Decision {
  const rules = step?.rules;
  const plan = ctx.consumer!.plan;
  const ruled = rules && rulesHeaders(quota, outcome, rules, (outcome as RulesOutcome).rules);
  const headers = ruled ? ruled.headers : rateLimitHeaders(quota, outcome);
  for (const name in headers) ctx.res.setHeader(name, headers[name]!);
  if (outcome.verdict === 'allowed') {
    deps.metrics.quotaDecisions.inc({ plan, decision: 'allowed', source });
    if (step?.reported && deps.reservations) {
      const { reported: rule, subject, ban, cost } = step;
      // (A lease's outcome estimates the TAT; only the store's places the reservation on it.)
      const tatUs = source === 'store' ? outcome.minuteTatUs : 0;
      const moveNo = outcome.moveNo ?? 0;
      const reserved = { rule, subject, keyId: ctx.consumer!.id, quota, ban, reserve: cost, nowMs: outcome.nowMs, tatUs, moveNo };
      ctx.reservation = new CostReservation(reserved, deps.reservations, ctx.res);
    }
    for (const rule of rules ?? []) deps.metrics.limitRuleDecisions.inc({ rule: rule.name, decision: 'allowed' });
    return CONTINUE;
  }
  // A rule refused: a real 429 whatever the plan (a shadow plan's too); the plan counted nothing.
  const refusing = rules?.[(outcome as RulesOutcome).refusedBy];
  if (refusing) {
    deps.metrics.quotaDecisions.inc({ plan, decision: 'rule_limited', source });
    deps.metrics.limitRuleDecisions.inc({ rule: refusing.name, decision: 'limited' });
    return reject('rate_limit_exceeded', `The limit rule "${refusing.name}" is exceeded; retry after the time in Retry-After.`, {
      'retry-after': ruled!.retryAfterSeconds,
    });
  }
  // Even under a shadow plan: the balance is money, never spent past zero. No Retry-After: time
  // does not help, a top-up does.
  if (outcome.verdict === 'unfunded') {
    deps.metrics.quotaDecisions.inc({ plan, decision: 'unfunded', source });
    return reject('insufficient_credits');
  }
  const code = REFUSALS[outcome.verdict] ?? 'rate_limit_exceeded';
  if (quota.shadow) {
    // A shadow plan refuses nobody: the would-be refusal is counted, logged and told, then admitted.
    deps.metrics.quotaDecisions.inc({ plan, decision: 'shadow_limited', source });
    // The first refusal is the one the plan would have given (route-to-service.ts may have one).
    if (!ctx.shadowRefusal) {
      ctx.res.setHeader('x-ratelimit-shadow', code);
      ctx.shadowRefusal = code;
    }
    return CONTINUE;
  }
  deps.metrics.quotaDecisions.inc({ plan, decision: outcome.verdict, source });
  // A slot frees when some request in flight ends: no window says when, so one second.
  if (outcome.verdict === 'concurrent') {
    deps.metrics.concurrencyRefusals.inc({ plan });
    return reject(code, undefined, { 'retry-after': 1 });
  }
  return reject(code, undefined, { 'retry-after': ruled ? ruled.retryAfterSeconds : retryAfterSeconds(quota, outcome) });
}

/**
 * 503 with Retry-After: this replica cannot decide in time now, and will not guess. Its rate-limit
 * fields come from what it last heard of the subject, never overstating (undecidedHeaders).
 */
function shed(step: QuotaStep, deps: QuotaDeps, reason: 'pending' | 'timeout'): Decision {
  deps.metrics.quotaShed.inc({ reason });
  undecided(step, deps);
  return reject('gateway_overloaded', undefined, { 'retry-after': 1 });
}

/** The rate-limit fields of an answer given without a store decision. */
function undecided({ ctx, quota, subject, cost }: QuotaStep, deps: QuotaDeps): void {
  const headers = undecidedHeaders(quota, deps.degraded.lastHeard(subject, quota, cost));
  for (const name in headers) ctx.res.setHeader(name, headers[name]!);
}

/** The configured failure mode, while the shared store cannot be asked. */
async function degrade(step: QuotaStep, deps: QuotaDeps): Promise<Decision> {
  const { ctx, quota, ban, subject, cost, slot } = step;
  const { mode } = deps.degraded;
  // A balance cannot be spent safely without the store that holds it: closed, whatever the mode.
  if (mode === 'closed' || quota.credits === 'required') {
    undecided(step, deps);
    return reject('rate_limit_store_unavailable', undefined, { 'retry-after': 1 });
  }
  ctx.degraded = true;
  ctx.res.setHeader('x-tollgate-degraded', mode === 'open' ? 'quota-open' : 'quota-local');
  if (mode === 'open') {
    deps.degraded.admittedOpen(subject, cost, quota);
    return CONTINUE;
  }
  // This replica's share of what was left when it last heard from Redis (local-share.ts); of a
  // rule's limit, its share of the whole (degraded-mode.ts).
  if (step.rules) {
    const ruled = await deps.degraded.decideRules(subject, quota, ban, cost, step.rules);
    // Decided without the store: a reported cost's reservation stands, unsettled (as below).
    return judge(ctx, deps, ruled.quota, ruled.outcome, 'fallback', { ...step, reported: undefined, rules: ruled.rules });
  }
  // Its share of maxConcurrent too, in this process (degraded-mode.ts).
  const decided = await deps.degraded.decide(subject, quota, ban, cost, slot);
  if (slot && decided.outcome.verdict === 'allowed') holdSlot({ ...step, slot: decided.slot }, deps, decided.slots);
  return judge(ctx, deps, decided.quota, decided.outcome, 'fallback');
}
