import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CountingTarget } from '../helpers/counting-targets.js';
import { answerStatus, deliveries, echoAfter, Held, ServicesStack, sleep, type Answer } from '../helpers/services-stack.js';

// A hot reload of gateway.yaml under traffic (issue 22, items 6 and 7): one target added and one
// removed while requests are in flight on the removed one. None is lost; new requests go to the
// new table only; a request in flight across the reload that goes again goes to a target of the
// new table; and the service's load counts survive the swap (else the retry budget leaks away).

const [petsA, petsB, petsC] = [new CountingTarget('pets-a'), new CountingTarget('pets-b'), new CountingTarget('pets-c')];
const [catsX, catsY, catsZ] = [new CountingTarget('cats-x'), new CountingTarget('cats-y'), new CountingTarget('cats-z')];
const [dogsP, dogsQ] = [new CountingTarget('dogs-p'), new CountingTarget('dogs-q')];
let stack: ServicesStack;

/** Requests to a path ending in /held wait for `held.release()`; the rest are answered at once. */
function holding(target: CountingTarget, held: Held) {
  const hold = held.behaviour(target);
  const echo = echoAfter(target, 0);
  return (req: IncomingMessage, res: ServerResponse, body: string) => (req.url?.endsWith('/held') ? hold : echo)(req, res, body);
}

const services = (pets: CountingTarget[], cats: CountingTarget[], dogsComment = '') => `
services:
  - name: pets
    paths: [/v1/pets]
    targets: [${pets.map((t) => t.url).join(', ')}]
  - name: cats
    paths: [/v1/cats]
    targets: [${cats.map((t) => t.url).join(', ')}]
    ejection: { consecutiveFailures: 1000 }
  - name: dogs   ${dogsComment}
    paths: [/v1/dogs]
    targets: [${dogsP.url}, ${dogsQ.url}]
    ejection: { consecutiveFailures: 1000 }
`;

beforeAll(async () => {
  const all = [petsA, petsB, petsC, catsX, catsY, catsZ, dogsP, dogsQ];
  stack = await ServicesStack.start(all, () => services([petsA, petsB], [catsX, catsY]), 'reload');
});

afterAll(() => stack?.close());

describe('a hot reload of the services under traffic', () => {
  it('adds one target and removes another with requests in flight on it: none lost, the new table takes the new ones', async () => {
    const held = new Held();
    for (const t of [petsA, petsB, petsC]) t.behaviour = holding(t, held);
    const inFlight: Array<Promise<Answer>> = [];
    for (let i = 0; i < 4; i++) inFlight.push(stack.request('GET', '/v1/pets/held'));
    for (let i = 0; i < 4; i++) inFlight.push(stack.request('POST', '/v1/pets/held', { body: `{"n":${i}}` }));
    // Round robin over two: half of them on the target about to be removed.
    while (held.count < 8) await sleep(10);
    expect(petsB.hits.length).toBe(4);

    await stack.reloadServices(services([petsA, petsC], [catsX, catsY]));
    const bHitsAtReload = petsB.hits.length;
    const after: Answer[] = [];
    for (let i = 0; i < 12; i++) after.push(await stack.request('GET', `/v1/pets/${i}`));
    held.release();
    const answers = await Promise.all(inFlight);

    expect(answers.map((a) => a.status)).toEqual(Array(8).fill(200));
    expect(answers.filter((a) => a.target === 'pets-b')).toHaveLength(4);
    for (const [id, n] of deliveries([petsA, petsB, petsC], 'POST')) expect(n, id).toBe(1);
    expect(after.map((a) => a.status)).toEqual(Array(12).fill(200));
    expect(new Set(after.map((a) => a.target))).toEqual(new Set(['pets-a', 'pets-c']));
    expect(petsB.hits.length).toBe(bHitsAtReload);
    const reloaded = stack.gateway.process.logs().find((l) => l.msg === 'services reloaded');
    expect(reloaded).toMatchObject({ removedTargets: [petsB.url] });
  });

  it('a request in flight across the reload that goes again goes to a target of the new table, never the removed one', async () => {
    const held = new Held();
    // x holds, then answers 503: the GET goes again, after the reload removed y and added z.
    catsX.behaviour = holdingThen(held, answerStatus(catsX, 503));
    const answer = stack.request('GET', '/v1/cats/held');
    while (held.count < 1) await sleep(10);
    await stack.reloadServices(services([petsA, petsC], [catsX, catsZ]));
    held.release();
    expect(await answer).toMatchObject({ status: 200, target: 'cats-z' });
    expect(catsY.hits).toEqual([]);
  });

  it('reloads while retries are in flight leave the retry budget whole', async () => {
    // p answers 503 at once, q holds: every GET that meets p first is a retry in flight on q.
    dogsP.behaviour = answerStatus(dogsP, 503);
    const held = new Held();
    dogsQ.behaviour = holding(dogsQ, held);
    for (let round = 0; round < 4; round++) {
      const before = dogsP.hits.length;
      // Round robin: of two GETs one meets p first and goes again to q, where both wait.
      const pending = [stack.request('GET', '/v1/dogs/held'), stack.request('GET', '/v1/dogs/held')];
      // Both held at q (one a retry); a GET answered meanwhile (the 503 relayed, not retried) ends the wait.
      let settled = 0;
      for (const p of pending) void p.then(() => settled++);
      while (held.count + settled < 2) await sleep(10);
      expect(held.count).toBe(2);
      expect(dogsP.hits.length).toBe(before + 1);
      await stack.reloadServices(services([petsA, petsC], [catsX, catsZ], `# reload ${round}`));
      held.release();
      expect((await Promise.all(pending)).map((a) => a.status)).toEqual([200, 200]);
    }
    // Four retries were in flight across four reloads; afterwards a GET that meets p still goes
    // again (the budget is at least 3 retries in flight, and none is).
    const answers: Answer[] = [];
    for (let i = 0; i < 4; i++) answers.push(await stack.request('GET', `/v1/dogs/${i}`));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
    expect(await stack.metric('tollgate_upstream_retry_budget_exhausted_total', { service: 'dogs' })).toBe(0);
  });

  it("a reload that changes a kept target's timeout takes effect on its next try; a request in flight keeps its pool", async () => {
    // Both dogs answer in 1 s; the shipped 15 s timeout lets that through.
    for (const t of [dogsP, dogsQ]) t.behaviour = echoAfter(t, 1000);
    const before = await stack.request('GET', '/v1/dogs/before');
    expect(before).toMatchObject({ status: 200 });
    const inFlight = stack.request('GET', '/v1/dogs/across');
    await sleep(200);
    // Same targets (kept: health and load), a timeout of 400 ms: undici fixes it per pool.
    await stack.reloadServices(`${services([petsA, petsC], [catsX, catsZ])}    timeoutMs: 400\n`);
    const after = await stack.request('GET', '/v1/dogs/after');
    expect(after).toMatchObject({ status: 504, code: 'gateway_timeout' });
    expect(await inFlight).toMatchObject({ status: 200 });
  });
});

/** A behaviour that holds each request until released, then answers it with `then`. */
function holdingThen(held: Held, then: (req: IncomingMessage, res: ServerResponse, body: string) => void) {
  return (req: IncomingMessage, res: ServerResponse, body: string) => held.hold(() => then(req, res, body));
}
