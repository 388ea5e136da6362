import type { Quota } from '../config/plans-schema.js';
import type { Logger } from '../observability/log.js';
import type { Metrics } from '../observability/metrics.js';
import { rateLimitHeaders } from '../quota/rate-limit-headers.js';
import type { QuotaStore, SlotStore } from '../store/quota-store.js';
import type { StoreHealth } from '../store/store-health.js';
import { CONTINUE, reject, type Decision, type RequestContext } from './context.js';
import { releaseWhenAnswerEnds, type ConcurrencySlots, type ReleaseSlot } from './concurrency-slots.js';
import type { DegradedMode } from './degraded-mode.js';
import type { RuleSlot } from './limit-rules.js';
import { waitOnRedis } from './redis-wait.js';

export interface RuleSlotDeps {
  store: QuotaStore;
  health: StoreHealth;
  degraded: DegradedMode;
  slots: ConcurrencySlots;
  metrics: Metrics;
  logger: Logger;
  /** redis.commandTimeoutMs: a slot's take is one of the request's waits on Redis (redis-wait.ts). */
  commandTimeoutMs: number;
}

/**
 * `maxConcurrent` on limit rules (docs/policies.md): the request takes a slot of every matching
 * rule's counter, each in its own call of the slot scripts (a rule's slot set is in a Cluster slot
 * of its own, so it cannot join the quota step's script), before the quota step `decide`. A slot
 * refused ends the request there: nothing charged, the slots already taken given back. A request
 * the quota step refuses gives them all back at once; one it admits holds them until its answer
 * ends or its client goes (the same 'close' as the consumer's slot, enforce-quota.ts holdSlot).
 */
export async function withRuleSlots(
  ctx: RequestContext,
  deps: RuleSlotDeps,
  wanted: readonly RuleSlot[],
  plan: { subject: string; quota: Quota },
  decide: () => Decision | Promise<Decision>,
): Promise<Decision> {
  const held: ReleaseSlot[] = [];
  const giveBack = () => held.forEach((release) => release());
  for (const slot of wanted) {
    const release = await take(ctx, deps, slot, ctx.consumer!.plan);
    if (release === 'refused') {
      giveBack();
      return refuse(ctx, deps, slot, plan);
    }
    if (release) held.push(release);
  }
  let decision: Decision;
  try {
    decision = await decide();
  } catch (err) {
    giveBack();
    throw err;
  }
  if (decision !== CONTINUE || held.length === 0) {
    giveBack();
    return decision;
  }
  releaseWhenAnswerEnds(ctx.res, giveBack);
  return decision;
}

/**
 * One rule's slot: in the shared store; while it is unreachable, in `local` mode this replica's
 * share of the rule's limit in its own memory (as the consumer's maxConcurrent); in `open` or
 * `closed` mode none (open counts nothing, closed refuses in the quota step).
 */
async function take(ctx: RequestContext, deps: RuleSlotDeps, slot: RuleSlot, plan: string): Promise<ReleaseSlot | 'refused' | undefined> {
  const shared = deps.store.slots;
  if (shared && deps.health.shouldTry()) {
    try {
      return (await onesTime(ctx, deps.commandTimeoutMs, () => deps.slots.take(shared, slot.subject, slot.max, plan))) ?? 'refused';
    } catch (err) {
      // The quota step that follows tells the store's health (with no time left, it is not sent);
      // the slot is taken as it would be without Redis.
      deps.logger.warn({ err, rule: slot.rule }, 'could not take a limit rule concurrency slot from the store');
    }
  }
  if (deps.degraded.mode !== 'local') return undefined;
  const local: SlotStore = deps.degraded.localSlots;
  return (await deps.slots.take(local, slot.subject, deps.degraded.shareOf(slot.max), plan)) ?? 'refused';
}

/**
 * A slot's take, one of the request's waits on Redis (redis-wait.ts); a slot granted after the
 * request gave up is given back at once, as nobody holds it.
 */
function onesTime(
  ctx: RequestContext,
  commandTimeoutMs: number,
  take: () => Promise<ReleaseSlot | undefined>,
): Promise<ReleaseSlot | undefined> {
  return waitOnRedis(ctx, commandTimeoutMs, () => {
    const taking = take();
    taking.then(
      (release) => ctx.redisWaitOver && release?.(),
      () => undefined,
    );
    return taking;
  });
}

/** 429 too_many_concurrent_requests naming the rule, with the plan's rate-limit headers as they stand (nothing was charged). */
async function refuse(ctx: RequestContext, deps: RuleSlotDeps, slot: RuleSlot, plan: { subject: string; quota: Quota }): Promise<Decision> {
  deps.metrics.limitRuleDecisions.inc({ rule: slot.rule, decision: 'concurrent' });
  deps.metrics.concurrencyRefusals.inc({ plan: ctx.consumer!.plan });
  try {
    const headers = rateLimitHeaders(plan.quota, await deps.store.usage(plan.subject, plan.quota));
    for (const name in headers) ctx.res.setHeader(name, headers[name]!);
  } catch {
    // Without the store the refusal goes out without them, as a shed answer's fields would be guessed.
  }
  return reject(
    'too_many_concurrent_requests',
    `The limit rule "${slot.rule}" allows ${slot.max} requests in flight at once; retry when one has finished.`,
    { 'retry-after': 1 },
  );
}
