import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ConcurrencySlots } from '../../src/gateway/concurrency-slots.js';
import { CONTINUE, type RequestContext } from '../../src/gateway/context.js';
import type { DegradedMode } from '../../src/gateway/degraded-mode.js';
import { withRuleSlots, type RuleSlotDeps } from '../../src/gateway/rule-slots.js';
import { createLogger } from '../../src/observability/log.js';
import { createMetrics } from '../../src/observability/metrics.js';
import type { QuotaStore, SlotClaim, SlotStore } from '../../src/store/quota-store.js';
import { StoreHealth } from '../../src/store/store-health.js';

// A limit rule's slot taken after the request's key record was read has what is left of its one
// command timeout (gateway/redis-wait.ts). A take that Redis grants after that cut is nobody's:
// the request was answered without it, and a slot this replica held would be renewed for as long
// as the process lives, one fewer for every client of the rule. It goes back at once.

afterEach(() => vi.useRealTimers());

const TIMEOUT_MS = 250;

function slotStore() {
  const takes: Array<{ member: string; grant: () => void }> = [];
  const released: string[] = [];
  const store: SlotStore = {
    take: (_subject: string, claim: SlotClaim) =>
      new Promise<boolean>((resolve) => takes.push({ member: claim.member, grant: () => resolve(true) })),
    release: async (_subject: string, members: readonly string[]) => void released.push(...members),
    renew: async () => undefined,
    count: async () => 0,
  };
  return { store, takes, released };
}

function request(redisWaitSinceMs: number): RequestContext {
  const res = Object.assign(new EventEmitter(), { setHeader: () => undefined }) as unknown as ServerResponse;
  return {
    req: {} as IncomingMessage,
    res,
    startedAtMs: 0,
    requestId: 'r',
    redisWaitSinceMs,
    consumer: { id: 'k', plan: 'free' },
  };
}

describe("a limit rule's slot taken with little of the request's time left", () => {
  it('is given back when Redis grants it after the request stopped waiting', async () => {
    vi.useFakeTimers();
    const { store, takes, released } = slotStore();
    const logger = createLogger('silent', 'tollgate-gateway', 'json');
    const metrics = createMetrics();
    const deps: RuleSlotDeps = {
      store: { slots: store } as unknown as QuotaStore,
      health: new StoreHealth('redis', logger),
      degraded: { mode: 'closed' } as unknown as DegradedMode,
      slots: new ConcurrencySlots(metrics, logger),
      metrics,
      logger,
      commandTimeoutMs: TIMEOUT_MS,
    };
    // Its key record's read took all but 10 ms of its time.
    const ctx = request(performance.now() - (TIMEOUT_MS - 10));
    const decide = vi.fn(() => CONTINUE);
    const deciding = withRuleSlots(
      ctx,
      deps,
      [{ rule: 'r', subject: 'rule:r:x', max: 3 }],
      { subject: 'k', quota: { perMinute: 1, perDay: 1 } },
      decide,
    );
    expect(takes).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(20);
    expect(ctx.redisWaitOver).toBe(true);
    await deciding;
    takes[0]!.grant();
    await vi.advanceTimersByTimeAsync(0);
    expect(released).toEqual([takes[0]!.member]);
    expect(deps.slots.size).toBe(0);
  });
});
