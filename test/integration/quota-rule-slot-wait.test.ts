import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { changeNoticesSubscribed, proxiedGateway, recordCached, type ProxiedGateway } from '../helpers/held-answers.js';
import { dayCountIn } from '../helpers/redis-server.js';
import { createKey, withLeases, type CreatedKey } from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// A limit rule's maxConcurrent slot is taken in Redis before the quota step (rule-slots.ts): a
// wait on Redis like the key record's read, sharing the request's one command timeout
// (gateway/redis-wait.ts). Here the slot's take spends all of it: a fault proxy holds it (and
// whatever follows it on the gateway's connection) until the gateway has answered. The quota
// decision then has no time left: it is not sent, and the request is answered as one whose call
// timed out. Before, the take's timeout was the request's first and the decision had a whole
// timeout of its own after it (two on Redis), sent while held, and counted by Redis once the path
// was back for a request its client had been refused. No timing is asserted: what was sent while
// held, and what Redis counted.

let stack: ProxiedGateway;
let other: CreatedKey;
let held: CreatedKey;

const RULE = `limits:
  - name: in-flight-per-address
    by: [client.address]
    maxConcurrent: 50
`;

beforeAll(async () => {
  // Key records cached (the shipped ttlSeconds): the slot's take is a request's first wait on Redis.
  stack = await proxiedGateway((yaml) => withLeases(false)(yaml).replace(/^limits: \[\][^\n]*\n/m, RULE));
  other = await createKey(stack.redis, ['--plan', 'free'], stack.configDir);
  held = await createKey(stack.redis, ['--plan', 'free'], stack.configDir);
});

afterAll(() => stack?.stop());

const call = (key: CreatedKey) => stack.call(key);

describe("a limit rule's slot whose take times out", () => {
  it('leaves the request no time for its quota decision: none is sent, Redis counts nothing for it', async () => {
    await awayFromDayEdge(120);
    await changeNoticesSubscribed(stack.redis);
    // The held key's record cached (a call of it reads no record), the other's known; Redis
    // answers just before: a timeout now is no outage (store-health.ts).
    await recordCached(stack, held);
    expect((await call(other)).status).toBe(200);
    const countedBefore = await dayCountIn(stack.redis, held.id);
    stack.proxy.holdFrom('tg:slots:');
    const answer = await call(held);
    const sentWhileHeld = stack.proxy.heldText();
    stack.proxy.release();
    // Once a later request's decision is answered on that connection, Redis has run what was held.
    expect((await call(other)).status).toBe(200);
    console.log(
      `slot take held: answered ${JSON.stringify(answer)}; held commands name its quota: ${sentWhileHeld.includes(`tg:quota:{${held.id}}`)}`,
    );
    expect(sentWhileHeld).toContain('tg:slots:');
    expect(sentWhileHeld).not.toContain(`tg:quota:{${held.id}}`);
    expect(answer.status === 503 ? answer.code : answer.degraded).toMatch(/^(gateway_overloaded|quota-local)$/);
    if (answer.status === 503) expect(await dayCountIn(stack.redis, held.id)).toBe(countedBefore);
  }, 120_000);
});
