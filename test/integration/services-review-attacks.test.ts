import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, ADMIN_TOKENS } from '../helpers/admin-client.js';
import { CountingTarget } from '../helpers/counting-targets.js';
import { pollUntil } from '../helpers/poll.js';
import { answerStatus, echoAfter, ServicesStack, sleep } from '../helpers/services-stack.js';

// What an attacker or an upstream's author could do to the retries of a service (a security
// review of issue 22): a 503 whose body never ends, retries that end in "no target in rotation",
// a hot reload that removes the only target a retry was about to go to again, probes of a target
// that never answers. Each case fails on the code before its fix.

const [leakA, leakB] = [new CountingTarget('leak-a'), new CountingTarget('leak-b')];
/**
 * The flood service's timeout, long on purpose: a flood that is not cut holds the request until it
 * fires (504), so a 200 from the other target sooner proves the cut on any machine.
 */
const FLOOD_TIMEOUT_MS = 30_000;
const [floodE, floodG] = [new CountingTarget('flood-e'), new CountingTarget('flood-g')];
const [trickleE, trickleG] = [new CountingTarget('trickle-e'), new CountingTarget('trickle-g')];
const [soloOld, soloNew] = [new CountingTarget('solo-old'), new CountingTarget('solo-new')];
const silent = new CountingTarget('silent');
const chaos = [new CountingTarget('chaos-a'), new CountingTarget('chaos-b'), new CountingTarget('chaos-c')];
let stack: ServicesStack;

const services = (solo: CountingTarget) => `
services:
  - name: leak
    paths: [/v1/leak]
    targets: [${leakA.url}, ${leakB.url}]
    retries: { attempts: 2 }
    ejection: { consecutiveFailures: 1, baseMs: 60000, maxMs: 60000, maxEjectedPercent: 100 }
  - name: flood
    paths: [/v1/flood]
    targets: [${floodE.url}, ${floodG.url}]
    timeoutMs: ${FLOOD_TIMEOUT_MS}
    ejection: { consecutiveFailures: 1000 }
  - name: trickle
    paths: [/v1/trickle]
    targets: [${trickleE.url}, ${trickleG.url}]
    timeoutMs: 1500
    ejection: { consecutiveFailures: 1000 }
  - name: solo
    paths: [/v1/solo]
    targets: [${solo.url}]
  - name: probed
    paths: [/v1/probed]
    targets: [${silent.url}]
    healthCheck: { path: /healthz, intervalMs: 100, timeoutMs: 5000 }
  - name: chaos
    paths: [/v1/chaos]
    targets: [${chaos.map((t) => t.url).join(', ')}]
    timeoutMs: 1000
    retries: { attempts: 3, budgetPercent: 100, idempotencyKey: true }
    ejection: { consecutiveFailures: 3, baseMs: 200, maxMs: 400, maxEjectedPercent: 100 }
    panic: all
`;

/** A 503 whose chunked body never ends: `bytes` every `everyMs`, until the gateway hangs up. */
function endless503(bytes: number, everyMs: number) {
  return (_req: unknown, res: ServerResponse) => {
    res.writeHead(503, { 'content-type': 'text/plain' });
    const timer = setInterval(() => res.write(Buffer.alloc(bytes, 'x')), everyMs);
    res.on('close', () => clearInterval(timer));
  };
}

interface Described {
  name: string;
  inFlight: number;
  retriesInFlight: number;
  targets: Array<{ url: string; inFlight: number }>;
}

async function describeService(name: string): Promise<Described> {
  const answer = await admin(stack.gateway.adminUrl, 'GET', '/services');
  return (answer.body.services as Described[]).find((s) => s.name === name)!;
}

beforeAll(async () => {
  silent.behaviour = () => undefined;
  stack = await ServicesStack.start(
    [leakA, leakB, floodE, floodG, trickleE, trickleG, soloOld, soloNew, silent, ...chaos],
    () => services(soloOld),
    'review',
    { TOLLGATE_ADMIN_TOKENS: ADMIN_TOKENS },
  );
});

afterAll(() => stack?.close());

describe('retries under attack', () => {
  it('a retry that finds no target in rotation gives its place in the retry budget back', async () => {
    leakA.behaviour = answerStatus(leakA, 503);
    leakB.behaviour = answerStatus(leakB, 503);
    // leak-a 503 (ejected), retry to leak-b 503 (ejected), the second retry finds none in rotation.
    const answer = await stack.request('GET', '/v1/leak/1');
    expect(answer).toMatchObject({ status: 503 });
    expect(leakA.hits.length + leakB.hits.length).toBe(2);
    // Each such request used to keep one retry "in flight" for good: three of them and the
    // service's budget (at least 3) refused every retry from then on.
    expect(await describeService('leak')).toMatchObject({ inFlight: 0, retriesInFlight: 0 });
  });

  it('a retryable 503 whose body floods without end is cut, and the retry goes ahead', async () => {
    floodE.behaviour = endless503(8 * 1024, 10);
    const started = Date.now();
    const answer = await stack.request('GET', '/v1/flood/1', { timeoutMs: FLOOD_TIMEOUT_MS * 2 });
    // Before: the endless body was read and dropped for ever (its bytes reset the idle timer).
    expect(answer).toMatchObject({ status: 200, target: 'flood-g' });
    expect(Date.now() - started).toBeLessThan(FLOOD_TIMEOUT_MS);
    expect(floodG.hits.length).toBe(1);
  });

  it('a retryable 503 whose body trickles without end ends at the service timeout with 504', async () => {
    trickleE.behaviour = endless503(16, 100);
    const started = Date.now();
    // The client waits far longer than the service's 1.5 s: the 504 is the gateway ending it.
    const answer = await stack.request('GET', '/v1/trickle/1', { timeoutMs: 60_000 });
    expect(answer).toMatchObject({ status: 504, code: 'gateway_timeout' });
    // Ended by the service's timeout: not before it, and well before any other timer (the shortest
    // other one, headersTimeoutMs, is 10 s), leaving a loaded machine 8 s of slack.
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(1_500);
    expect(elapsed).toBeLessThan(10_000);
    // No try past the deadline: the other target was never sent a request doomed to time out.
    expect(trickleG.hits.length).toBe(0);
    const described = await pollUntil(
      () => describeService('trickle'),
      (d) => d.inFlight === 0 && d.retriesInFlight === 0,
      { deadline: Date.now() + 30_000 },
    );
    expect(described).toMatchObject({ inFlight: 0, retriesInFlight: 0 });
  });

  it('a retry after a closed connection never goes to the target a reload removed', async () => {
    let pending: ServerResponse | undefined;
    soloOld.behaviour = (_req, res) => (pending = res);
    const answer = stack.request('GET', '/v1/solo/held');
    while (!pending) await sleep(10);
    await stack.reloadServices(services(soloNew));
    // The removed target drops the connection unanswered: the GET may go again on a new connection,
    // but to the service as the reload left it.
    soloOld.behaviour = echoAfter(soloOld, 0);
    pending.socket!.destroy();
    expect(await answer).toMatchObject({ status: 200, target: 'solo-new' });
    expect(soloOld.hits.length).toBe(1);
    expect(soloNew.hits.length).toBe(1);
  });

  it('a target that never answers its probes is not probed again while a probe is still waiting', async () => {
    const [connections, hits] = [silent.connections, silent.hits.length];
    await sleep(1_500);
    // intervalMs 100, timeoutMs 5000: 15 probes waiting at once (each on a connection of its own,
    // from the pool client requests use) before the fix; one after.
    expect(silent.connections - connections).toBeLessThanOrEqual(1);
    expect(silent.hits.length - hits).toBeLessThanOrEqual(1);
  });

  it('after chaos (503s, resets, endless bodies, clients leaving at any time) every in-flight count is back to 0', async () => {
    for (const t of chaos) {
      const flood = endless503(1024, 20);
      const echo = echoAfter(t, 30);
      t.behaviour = (req, res, body) => {
        const roll = Math.random();
        if (roll < 0.25) return answerStatus(t, 503)(req, res, body);
        if (roll < 0.4) return void req.socket.destroy();
        if (roll < 0.5) return flood(req, res);
        echo(req, res, body);
      };
    }
    const answers = await Promise.all(
      Array.from({ length: 150 }, (_, i) =>
        stack.request(i % 3 === 0 ? 'POST' : 'GET', `/v1/chaos/${i}`, {
          body: i % 3 === 0 ? `{"n":${i}}` : undefined,
          headers: i % 6 === 0 ? { 'idempotency-key': `k-${i}` } : {},
          // Some clients leave before the answer, at any point of the tries.
          timeoutMs: i % 2 ? 20 + Math.floor(Math.random() * 400) : 5_000,
        }),
      ),
    );
    expect(answers.filter((a) => a.status !== 0).length).toBeGreaterThan(0);
    const described = await pollUntil(
      () => describeService('chaos'),
      (d) => !d.inFlight && !d.retriesInFlight && !d.targets.some((t) => t.inFlight),
      { deadline: Date.now() + 60_000, everyMs: 50 },
    );
    expect(described).toMatchObject({ inFlight: 0, retriesInFlight: 0 });
    expect(described.targets.map((t) => t.inFlight)).toEqual([0, 0, 0]);
  });
});
