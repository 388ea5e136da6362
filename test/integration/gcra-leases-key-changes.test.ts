import { describe, expect, it } from 'vitest';
import type { Quota } from '../../src/config/plans-schema.js';
import { answerOf, hammer, leasedRequests, withLeases, worstSpans, type Answer } from '../helpers/gcra-leases.js';
import { quotaStack } from '../helpers/quota-stack.js';
import { keysCli } from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// gcra leases (src/quota/quota-leases.ts) end at once for a key that changes, with three real
// gateways on one real redis-server: a key moved to another plan, revoked, banned or unbanned
// while every gateway holds a lease of it. docs/operations.md's bounds ("in force on every
// replica at once (pub/sub)", "everywhere at once") hold: once a gateway shows the change, no
// request sent to it later is answered as before, and every gateway shows it.

const PLANS = `
plans:
  smooth: { perMinute: 1200, perDay: 1000000, algorithm: gcra, burst: 50 }
  spent:  { perMinute: 20, perDay: 20, algorithm: gcra, burst: 20 }
ban: { afterRejections: 40, window: 60, duration: 600 }
`;
const SMOOTH: Quota = { perMinute: 1200, perDay: 1_000_000, algorithm: 'gcra', burst: 50 };
const stack = quotaStack(PLANS, withLeases);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * One client sending `key`'s requests round robin over the gateways, a pause of 70 ms after each
 * answer: under the rate (19 a second), yet hot on every gateway (hotPerSecond 3), so each keeps a
 * lease of it.
 */
function steady(key: string) {
  const answers: Answer[] = [];
  let stopped = false;
  const running = (async () => {
    for (let i = 0; !stopped; i++) {
      answers.push(await answerOf(stack.send(key, i % 3), i % 3));
      await sleep(70);
    }
  })();
  return {
    answers,
    stop: async () => {
      stopped = true;
      await running;
    },
  };
}

/** Waits until the gateways have admitted `more` requests on leases (the event that they hold some). */
async function leasesInUse(more: number): Promise<void> {
  const before = await leasedRequests(stack);
  let now = before;
  for (let polls = 0; now - before < more && polls < 300; polls++) {
    await sleep(100);
    now = await leasedRequests(stack);
  }
  expect(now - before).toBeGreaterThanOrEqual(more);
}

/** Sends to each gateway until it shows the change, then `more` at once: every one shows it. All answers. */
async function everyGatewayShows(key: string, changed: (a: Answer) => boolean, more = 10): Promise<Answer[]> {
  const answers: Answer[] = [];
  for (let gateway = 0; gateway < 3; gateway++) {
    let answer = await answerOf(stack.send(key, gateway), gateway);
    answers.push(answer);
    for (let polls = 0; !changed(answer) && polls < 500; polls++) {
      answer = await answerOf(stack.send(key, gateway), gateway);
      answers.push(answer);
    }
    expect(changed(answer)).toBe(true);
    const after = await Promise.all(Array.from({ length: more }, () => answerOf(stack.send(key, gateway), gateway)));
    expect(after.filter((a) => !changed(a))).toEqual([]);
    answers.push(...after);
  }
  return answers;
}

/**
 * Per gateway: once an answer showed that it knows of the change (`seen`), no request sent to it
 * later is answered as before (`before`): its lease of the key ended then, if not earlier.
 */
function neverBack(answers: Answer[], seen: (a: Answer) => boolean, before: (a: Answer) => boolean): void {
  for (let gateway = 0; gateway < 3; gateway++) {
    const mine = answers.filter((a) => a.gateway === gateway);
    const first = Math.min(...mine.filter(seen).map((a) => a.receivedMs));
    expect(mine.filter((a) => a.sentMs > first && before(a))).toEqual([]);
  }
}

async function cli(args: string[]): Promise<void> {
  expect((await keysCli(stack.redis(), args, stack.configDir())).code).toBe(0);
}

describe('gcra leases of a key that changes', { timeout: 120_000 }, () => {
  it('end at once when the key moves to another plan', async () => {
    await awayFromDayEdge(60);
    const key = await stack.newKey(['--plan', 'smooth']);
    const sender = steady(key.key);
    // Over 20 admitted: the day of `spent` is used up when the key moves to it.
    await leasesInUse(25);
    await cli(['set-plan', key.id, 'spent']);
    // A plan that leases too (rule 7: 19 cells of room), but whose day is spent. Its policy in a response: that gateway has
    // the key's new record. A lease of the old plan admitting after that would answer 200.
    const newPlan = (a: Answer) => a.policy?.includes('"day";q=20;') === true;
    const polled = await everyGatewayShows(key.key, (a) => a.status === 429 && newPlan(a));
    await sender.stop();
    neverBack([...sender.answers, ...polled], newPlan, (a) => a.status === 200);
    expect(sender.answers.filter((a) => a.status === 200).length).toBeGreaterThan(0);
  });

  it('end at once when the key is revoked', async () => {
    await awayFromDayEdge(60);
    const key = await stack.newKey(['--plan', 'smooth']);
    const sender = steady(key.key);
    await leasesInUse(10);
    await cli(['revoke', key.id]);
    const revoked = (a: Answer) => a.status === 401 && a.code === 'revoked_api_key';
    const polled = await everyGatewayShows(key.key, revoked);
    await sender.stop();
    neverBack([...sender.answers, ...polled], revoked, (a) => !revoked(a));
  });

  it('end at once when the key is banned, and the key is admitted again once unbanned', async () => {
    await awayFromDayEdge(60);
    const key = await stack.newKey(['--plan', 'smooth']);
    const sender = steady(key.key);
    await leasesInUse(10);
    // A rush far over the rate: Redis counts 40 refusals and bans the key while leases are out.
    const banned = (a: Answer) => a.status === 429 && a.code === 'api_key_banned';
    const rush = await hammer(stack, key.key, (sent) => sent >= 1500);
    await sender.stop();
    const all = [...sender.answers, ...rush];
    neverBack(all, banned, (a) => !banned(a));
    expect(worstSpans(all, SMOOTH).excess).toBeLessThanOrEqual(0);
    neverBack([...all, ...(await everyGatewayShows(key.key, banned))], banned, (a) => !banned(a));

    // Unbanned: once a gateway admits the key again, it never answers banned again (rate limits
    // may still refuse: few enough, 5 at once per gateway, to stay short of a new ban).
    await cli(['unban', key.id]);
    const again = steady(key.key);
    const unbanned = (a: Answer) => !banned(a);
    const polled = await everyGatewayShows(key.key, unbanned, 5);
    await again.stop();
    neverBack([...again.answers, ...polled], unbanned, banned);
    expect(again.answers.filter((a) => a.status === 200).length).toBeGreaterThan(0);
  });
});
