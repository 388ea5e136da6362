import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { changeNoticesSubscribed, proxiedGateway, recordCached, type ProxiedGateway } from '../helpers/held-answers.js';
import { createKey, withLeases, type CreatedKey } from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// A request under a plan's maxConcurrent that also matches a limit rule is decided in two calls
// of Redis (enforce-quota.ts consumeRulesWithSlot: the slot alone, then the rules and the plan),
// and both share its one command timeout (gateway/redis-wait.ts), as any two waits of it do, even
// with its key record cached (no read began its time). Here every command waits 100 ms each way
// on a fault proxy: each alone fits the shipped 250 ms, the two together cannot, so the request is
// answered as one whose call timed out, never admitted after two. Before, the slot's take was
// ioredis's to time out and the decision after it had a whole timeout of its own: 200 after 400 ms
// and more on Redis. No timing is asserted: only that the request was not admitted.

const PLANS = `
plans:
  free:  { perMinute: 1000, perDay: 100000 }
  slots: { perMinute: 1000, perDay: 100000, maxConcurrent: 50 }
ban: { afterRejections: 1000, window: 60, duration: 60 }
`;

const RULE = `limits:
  - name: per-address
    by: [client.address]
    perMinute: 100000
`;

let stack: ProxiedGateway;
let other: CreatedKey;
let held: CreatedKey;

beforeAll(async () => {
  stack = await proxiedGateway((yaml) => withLeases(false)(yaml).replace(/^limits: \[\][^\n]*\n/m, RULE), { 'plans.yaml': () => PLANS });
  other = await createKey(stack.redis, ['--plan', 'free'], stack.configDir);
  held = await createKey(stack.redis, ['--plan', 'slots'], stack.configDir);
});

afterAll(() => stack?.stop());

describe('a slot and a decision under one command timeout', () => {
  it('leaves the decision what the slot left of it: two slow calls are not admitted after two timeouts', async () => {
    await awayFromDayEdge(120);
    await changeNoticesSubscribed(stack.redis);
    await recordCached(stack, held);
    // Redis answers just before: a timeout now is no outage (store-health.ts).
    expect((await stack.call(other)).status).toBe(200);
    stack.proxy.latency(100);
    const answer = await stack.call(held);
    stack.proxy.latency(0);
    console.log(`slot and decision 200 ms each: answered ${JSON.stringify(answer)}`);
    expect(answer.status === 503 ? answer.code : String(answer.degraded)).toMatch(/^(gateway_overloaded|quota-local)$/);
  }, 120_000);
});
