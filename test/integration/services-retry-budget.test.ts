import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CountingTarget } from '../helpers/counting-targets.js';
import { freePort } from '../helpers/ports.js';
import { echoAfter, ServicesStack } from '../helpers/services-stack.js';

// The retry budget (issue 22, item 4): a service whose every target answers 503 under concurrency
// is not buried under its own retries. Retries in flight stay within max(3, 20 % of the requests
// in flight), so most requests get their 503 relayed after one try, and the budget's refusals are
// counted; without a budget, 30 GETs with `attempts: 5` would make 180 tries. A failover is
// outside the budget: a try whose target is gone (refused: nothing listening; or its connection
// reset before any answer: an instance killed mid-request) while another target is in rotation.
// Such a burst must not turn into 502s for the requests routed to a dead instance before it is
// ejected; when every target fails, the budget applies (the first case).

const targets = [new CountingTarget('budget-a'), new CountingTarget('budget-b'), new CountingTarget('budget-c')];
const live = [new CountingTarget('live-a'), new CountingTarget('live-b')];
const resetting = new CountingTarget('resetting');
const CLIENTS = 30;
const ATTEMPTS = 5;
let stack: ServicesStack;

/** Request ids seen by any target: a request id seen again is a retry. */
const seen = new Set<string>();
let retriesAtTargets = 0;
let mostRetriesAtTargets = 0;

beforeAll(async () => {
  for (const t of targets) {
    t.behaviour = (req, res) => {
      const id = String(req.headers['x-request-id']);
      const retry = seen.has(id);
      seen.add(id);
      if (retry) mostRetriesAtTargets = Math.max(mostRetriesAtTargets, ++retriesAtTargets);
      // Slow enough that every client's first try is in flight together.
      setTimeout(() => {
        if (retry) retriesAtTargets--;
        res.statusCode = 503;
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ target: t.name, status: 503 }));
      }, 150);
    };
  }
  for (const t of live) t.behaviour = echoAfter(t, 200);
  // Reads the request, then resets the connection: what a killed instance's in-flight requests see.
  resetting.behaviour = (req) => req.socket.resetAndDestroy();
  // A port nothing listens on: every try there is refused.
  const dead = `http://127.0.0.1:${await freePort()}`;
  stack = await ServicesStack.start(
    [...targets, ...live, resetting],
    () => `
services:
  - name: failing
    paths: [/v1/failing]
    targets: [${targets.map((t) => t.url).join(', ')}]
    retries: { attempts: ${ATTEMPTS} }
    ejection: { consecutiveFailures: 1000 }
  - name: killed
    paths: [/v1/killed]
    targets: [${live[0]!.url}, ${dead}, ${live[1]!.url}]
    ejection: { consecutiveFailures: 1000 }
  - name: reset
    paths: [/v1/reset]
    targets: [${live[0]!.url}, ${resetting.url}, ${live[1]!.url}]
    ejection: { consecutiveFailures: 1000 }
`,
    'budget',
  );
});

afterAll(() => stack?.close());

describe('the retry budget under a failing service', () => {
  it(`bounds the retries of ${CLIENTS} concurrent GETs to max(3, 20 % of those in flight)`, async () => {
    const answers = await Promise.all(Array.from({ length: CLIENTS }, (_, i) => stack.request('GET', `/v1/failing/${i}`)));
    // The targets' own 503, relayed once no retry may follow.
    for (const a of answers) expect(a).toMatchObject({ status: 503, code: undefined });
    expect(new Set(answers.map((a) => a.target)).size).toBeGreaterThan(0);

    const tries = targets.reduce((n, t) => n + t.hits.length, 0);
    const retries = await stack.metric('tollgate_upstream_retries_total', { service: 'failing' });
    const exhausted = await stack.metric('tollgate_upstream_retry_budget_exhausted_total', { service: 'failing' });
    console.log(
      `retry budget: ${CLIENTS} GETs, ${tries} tries (${(tries / CLIENTS).toFixed(2)} a request, at most ${1 + ATTEMPTS} without a budget), ` +
        `${retries} retries, at most ${mostRetriesAtTargets} at once at the targets, budget refusals ${exhausted}`,
    );
    expect(retries).toBe(tries - CLIENTS);
    // At most 20 % of 30 in flight at once (the targets see a subset of the gateway's retries in flight).
    expect(mostRetriesAtTargets).toBeLessThanOrEqual(Math.max(3, Math.floor(CLIENTS * 0.2)));
    expect(exhausted).toBeGreaterThan(0);
    // Well under 1 + attempts on average.
    expect(tries / CLIENTS).toBeLessThan(3);
  });

  it(`does not count retries after a refused connection: ${CLIENTS} concurrent GETs, a third routed to a dead port, all answered`, async () => {
    // Never ejected here (consecutiveFailures 1000): every third request meets the dead port and
    // its retry holds 200 ms at a live target, about 10 at once against a budget of 6.
    const answers = await Promise.all(Array.from({ length: CLIENTS }, (_, i) => stack.request('GET', `/v1/killed/${i}`)));
    expect(answers.filter((a) => a.status !== 200)).toEqual([]);
    const connectRetries = await stack.metric('tollgate_upstream_retries_total', { service: 'killed', reason: 'connect' });
    expect(connectRetries).toBeGreaterThanOrEqual(Math.floor(CLIENTS / 3) - 1);
    expect(await stack.metric('tollgate_upstream_retry_budget_exhausted_total', { service: 'killed' })).toBe(0);
  });

  it(`does not count failovers after a reset either: ${CLIENTS} concurrent GETs, a third reset by their target, all answered`, async () => {
    const answers = await Promise.all(Array.from({ length: CLIENTS }, (_, i) => stack.request('GET', `/v1/reset/${i}`)));
    expect(answers.filter((a) => a.status !== 200)).toEqual([]);
    expect(resetting.hits.length).toBeGreaterThanOrEqual(Math.floor(CLIENTS / 3) - 1);
    expect(await stack.metric('tollgate_upstream_retries_total', { service: 'reset', reason: 'closed' })).toBe(resetting.hits.length);
    expect(await stack.metric('tollgate_upstream_retry_budget_exhausted_total', { service: 'reset' })).toBe(0);
  });
});
