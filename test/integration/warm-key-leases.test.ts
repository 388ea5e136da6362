import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answerOf, leasedRequests, type Answer } from '../helpers/gcra-leases.js';
import { threeGateways } from '../helpers/quota-stack.js';
import { configCopy, slackRedisTimeout } from '../helpers/stack.js';
import { awayFromDayEdge, inOneMinute } from '../helpers/windows.js';

// Warm keys (src/quota/quota-leases.ts, rule 15), gateway.yaml as shipped: keys far below
// hotPerSecond that call steadily take leases living until their minute's end, so most of their
// requests are admitted without a Redis command, and a burst at the limit is still admitted to
// exactly the limit (their units are recalled as a hot key's). Three real gateways on one real
// redis-server, with two busy processes beside them: exactness under load, not on a quiet machine.

const PLANS = `
plans:
  steady:  { perMinute: 100000, perDay: 10000000 }
  six:     { perMinute: 600, perDay: 1000000 }
ban:
  afterRejections: 100000
  window: 60
  duration: 60
`;

const stack = threeGateways(() => configCopy({ 'plans.yaml': () => PLANS, 'gateway.yaml': slackRedisTimeout }));

let busy: ChildProcess[] = [];
beforeAll(() => {
  busy = [0, 1].map(() => spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
});
afterAll(() => {
  for (const child of busy) if (child.exitCode === null && child.signalCode === null) process.kill(child.pid!, 'SIGKILL');
});

/** Script calls Redis has run (EVALSHA and EVAL): every quota decision, lease grant and give-back is one. */
async function scriptCalls(): Promise<number> {
  const info = await stack.redis().client().info('commandstats');
  let calls = 0;
  for (const m of info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)) calls += Number(m[1]);
  return calls;
}

/** Each key's requests, `perKeyPerSecond` a second each, round robin over the gateways, until `until()`. */
async function steadily(keys: string[], perKeyPerSecond: number, until: () => Promise<boolean>): Promise<Answer[]> {
  const answers: Answer[] = [];
  let sent = 0;
  const deadline = Date.now() + 90_000;
  while (!(await until())) {
    expect(Date.now()).toBeLessThan(deadline);
    const startedMs = Date.now();
    // One request of each key (a tenth of a second's worth of them), each to the next gateway.
    const round = keys.map((key) => {
      const gateway = sent++ % 3;
      return answerOf(stack.send(key, gateway), gateway);
    });
    answers.push(...(await Promise.all(round)));
    const spentMs = Date.now() - startedMs;
    await new Promise((r) => setTimeout(r, Math.max(0, 1000 / perKeyPerSecond - spentMs)));
  }
  return answers;
}

describe('warm keys take leases (the shipped config)', { timeout: 600_000 }, () => {
  it('keys far below hotPerSecond that call steadily are admitted mostly from leases, with few Redis commands', async () => {
    const keys = await Promise.all(Array.from({ length: 12 }, () => stack.newKey(['--plan', 'steady'])));
    const bearers = keys.map((k) => k.key);
    // About 2 a second per key on each gateway: 25 times below the shipped hotPerSecond (50).
    const leasedBefore = await leasedRequests(stack);
    await steadily(bearers, 6, async () => (await leasedRequests(stack)) - leasedBefore >= 100);
    // Measured now that leases are out: 60 rounds, 720 requests. A minute edge inside it costs a
    // give-back, a decision and a grant per key and gateway at most (108 calls).
    const callsBefore = await scriptCalls();
    const leasedFrom = await leasedRequests(stack);
    let rounds = 0;
    const answers = await steadily(bearers, 6, () => Promise.resolve(rounds++ >= 60));
    expect(answers.every((a) => a.status === 200)).toBe(true);
    const calls = (await scriptCalls()) - callsBefore;
    const leased = (await leasedRequests(stack)) - leasedFrom;
    // Without leases every request is a decision; batched per turn, hardly fewer at this rate.
    expect(calls).toBeLessThan(answers.length * 0.3);
    expect(leased).toBeGreaterThan(answers.length * 0.6);
  });

  it('a burst on warm keys at the limit is admitted to exactly the limit, their leased units recalled', async () => {
    await awayFromDayEdge(120);
    for (let round = 0; round < 3; round++) {
      await inOneMinute(async () => {
        const key = (await stack.newKey(['--plan', 'six'])).key;
        // Warm on every gateway (about 3 a second each, a block of 32 in 11 s): until some hold a lease of it.
        const leasedBefore = await leasedRequests(stack);
        const warmed = await steadily([key, key, key], 3, async () => (await leasedRequests(stack)) - leasedBefore >= 6);
        expect(warmed.every((a) => a.status === 200)).toBe(true);
        // Then more than the minute has left, at once, over the three gateways.
        const burst = await Promise.all(Array.from({ length: 700 - warmed.length }, (_, i) => answerOf(stack.send(key, i % 3), i % 3)));
        const admitted = warmed.length + burst.filter((a) => a.status === 200).length;
        expect(burst.filter((a) => a.status !== 200).every((a) => a.code === 'rate_limit_exceeded')).toBe(true);
        expect(admitted).toBe(600);
      });
    }
  });
});
