import { describe, expect, it } from 'vitest';
import { answerOf, leaseRecalls, leasedRequests, type Answer } from '../helpers/gcra-leases.js';
import { threeGateways } from '../helpers/quota-stack.js';
import { configCopy, keysCli, slackRedisTimeout } from '../helpers/stack.js';
import { awayFromDayEdge, inOneMinute } from '../helpers/windows.js';

// Quota leases are on in the shipped config, and a burst that reaches the limit while units are
// out on leases is still admitted to exactly the limit: a request Redis cannot fit while a lease
// of its key may admit recalls the leased units and is decided again once they are back
// (src/quota/quota-leases.ts, rule 11). Three real gateways on one real redis-server, gateway.yaml
// as shipped (only Redis's command timeout made patient for a loaded machine).

const PLANS = `
plans:
  fifty:      { perMinute: 50, perDay: 1000000 }
  fiftygcra:  { perMinute: 50, perDay: 1000000, algorithm: gcra, burst: 50 }
  fiftyowner: { perMinute: 50, perDay: 1000000, scope: owner }
  warm:       { perMinute: 300, perDay: 1000000 }
  warmgcra:   { perMinute: 300, perDay: 1000000, algorithm: gcra, burst: 300 }
  warmowner:  { perMinute: 300, perDay: 1000000, scope: owner }
  day300:     { perMinute: 300, perDay: 300 }
ban:
  afterRejections: 150
  window: 60
  duration: 60
`;

const stack = threeGateways(() => configCopy({ 'plans.yaml': () => PLANS, 'gateway.yaml': slackRedisTimeout }));
const send = (key: string, gateway: number) => stack.send(key, gateway);

/** `count` requests of `key` at once, round robin over `over` (the three gateways). */
function burst(key: string, count: number, over = [0, 1, 2]): Promise<Answer[]> {
  return Promise.all(
    Array.from({ length: count }, (_, i) => {
      const gateway = over[i % over.length]!;
      return answerOf(send(key, gateway), gateway);
    }),
  );
}

/** Admitted, refused for the limit and refused for a ban. */
function tally(answers: Answer[]) {
  const codes = answers.map((a) => (a.status === 200 ? 'admitted' : a.code));
  const count = (what: string | undefined) => codes.filter((c) => c === what).length;
  return { admitted: count('admitted'), limited: count('rate_limit_exceeded'), banned: count('api_key_banned') };
}

// Every refusal is counted towards a ban once (a recalled one only when it is decided again): 150
// refusals of 200 make the last of them the ban, at exactly the configured count.
const EXACT = { admitted: 50, limited: 149, banned: 1 };

describe('a burst at the limit with leases on (the shipped config)', { timeout: 600_000 }, () => {
  for (const [name, plan, owner] of [
    ['a key', 'fifty', false],
    ['a gcra key', 'fiftygcra', false],
    ['an owner', 'fiftyowner', true],
  ] as const) {
    it(`admits exactly the limit: 200 concurrent requests of ${name} on 50/minute over three gateways, ten times`, async () => {
      await awayFromDayEdge(120);
      for (let round = 0; round < 10; round++) {
        await inOneMinute(async () => {
          const args = ['--plan', plan, ...(owner ? ['--owner', `burst-${plan}-${round}-${Date.now()}`] : [])];
          const key = await stack.newKey(args);
          expect(tally(await burst(key.key, 200))).toEqual(EXACT);
        });
      }
    });
  }

  /** Requests to gateway `gateway` only, 20 at a time, until some gateway admitted one from a lease. */
  async function warmUntilLeased(key: string, gateway: number): Promise<Answer[]> {
    const before = await leasedRequests(stack);
    let warmed: Answer[] = [];
    const deadline = Date.now() + 30_000;
    while ((await leasedRequests(stack)) === before) {
      expect(Date.now()).toBeLessThan(deadline);
      warmed = warmed.concat(await Promise.all(Array.from({ length: 20 }, () => answerOf(send(key, gateway), gateway))));
    }
    return warmed;
  }

  const dayUsed = async (id: string) =>
    (JSON.parse((await keysCli(stack.redis(), ['usage', id, '--json'], stack.configDir())).stdout) as { day: { used: number } }).day.used;

  for (const [name, plan, owner] of [
    ['a key', 'warm', false],
    ['a gcra key', 'warmgcra', false],
    ['an owner', 'warmowner', true],
  ] as const) {
    it(`recalls the units a lease of ${name} holds when a burst on the other gateways reaches the limit`, async () => {
      await awayFromDayEdge(120);
      await inOneMinute(async () => {
        const key = await stack.newKey(['--plan', plan, ...(owner ? ['--owner', `warm-${Date.now()}`] : [])]);
        // Gateway 0 sees the key hot (≥ 50 a second, the shipped hotPerSecond) and takes a lease.
        const warmed = await warmUntilLeased(key.key, 0);
        expect(tally(warmed).admitted).toBe(warmed.length);
        // The rest of the minute's 300 and more, at once, on the two gateways without the lease:
        // the units it holds come back to them, and exactly 300 are admitted in all.
        const recallsBefore = await leaseRecalls(stack);
        const answers = await burst(key.key, 400 - warmed.length, [1, 2]);
        expect(tally(answers).admitted + warmed.length).toBe(300);
        expect(tally(answers).banned).toBe(0);
        expect(await leaseRecalls(stack)).toBeGreaterThan(recallsBefore);
      });
    });
  }

  it('a holder whose subscription is cut: never over, and its units come back to the window', async () => {
    await awayFromDayEdge(120);
    const key = await stack.newKey(['--plan', 'day300']);
    const warmed = await warmUntilLeased(key.key, 0);
    // Every gateway's subscription is cut just as the burst starts: the recall may reach no one.
    await stack.redis().client().call('CLIENT', 'KILL', 'TYPE', 'pubsub');
    const answers = await burst(key.key, 350 - warmed.length, [1, 2]);
    const admitted = warmed.length + tally(answers).admitted;
    expect(admitted).toBeLessThanOrEqual(300);
    // The lease ends (its subscription's gap, or its life) and gives its units back: later
    // requests of the day get them, and the day admits exactly its limit.
    const deadline = Date.now() + 30_000;
    let more = 0;
    while (admitted + more < 300 && Date.now() < deadline) {
      more += tally(await burst(key.key, 30, [1, 2])).admitted;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(admitted + more).toBe(300);
    expect(await dayUsed(key.id)).toBe(300);
  });

  // Last: it kills a gateway.
  it('a holder killed with -9: the burst admits the limit less what it held, never more', async () => {
    await awayFromDayEdge(120);
    const key = await stack.newKey(['--plan', 'day300']);
    const warmed = await warmUntilLeased(key.key, 2);
    await stack.gateways()[2]!.process.stop('SIGKILL');
    const held = (await dayUsed(key.id)) - warmed.length;
    expect(held).toBeGreaterThanOrEqual(0);
    // Its recall goes unanswered: the refused requests wait for the bound, then are refused.
    const answers = await burst(key.key, 350 - warmed.length, [0, 1]);
    expect(warmed.length + tally(answers).admitted).toBe(300 - held);
  });
});
