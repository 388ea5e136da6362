import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CountingTarget } from '../helpers/counting-targets.js';
import { deliveries, echoAfter, ServicesStack, sleep, type Answer } from '../helpers/services-stack.js';

// One instance of three killed under steady load (issue 22, item 7): GETs see no error; a POST
// fails only if it had already gone to the dead instance (a 502, counted); a POST that meets the
// dead port (connection refused: it never left) goes to another instance; and no POST is ever
// delivered twice, counted by request id across every instance.

const pets = [new CountingTarget('pets-a'), new CountingTarget('pets-b'), new CountingTarget('pets-c')];
const orders = [new CountingTarget('orders-a'), new CountingTarget('orders-b'), new CountingTarget('orders-c')];
let stack: ServicesStack;
/** The methods of the requests each instance has read and not answered yet. */
const answering = new Map<CountingTarget, string[]>();

beforeAll(async () => {
  // Every answer takes a little while, so that requests are in flight on the instance killed.
  for (const t of pets) {
    const echo = echoAfter(t, 100);
    const waiting: string[] = [];
    answering.set(t, waiting);
    t.behaviour = (req, res, body) => {
      waiting.push(req.method!);
      res.once('close', () => waiting.splice(waiting.indexOf(req.method!), 1));
      echo(req, res, body);
    };
  }
  stack = await ServicesStack.start(
    [...pets, ...orders],
    () => `
services:
  - name: pets
    paths: [/v1/pets]
    targets: [${pets.map((t) => t.url).join(', ')}]
    ejection: { consecutiveFailures: 5, baseMs: 60000, maxMs: 60000 }
  - name: orders
    paths: [/v1/orders]
    targets: [${orders.map((t) => t.url).join(', ')}]
`,
    'kill',
  );
});

afterAll(() => stack?.close());

/** `clients` loops sending `send()` one after another until `stop` says so. */
async function steady(clients: number, send: (client: number) => Promise<Answer>, stop: () => boolean): Promise<Answer[]> {
  const answers: Answer[] = [];
  await Promise.all(
    Array.from({ length: clients }, async (_, client) => {
      while (!stop()) answers.push(await send(client));
    }),
  );
  return answers;
}

/** Waits for `condition`; a bound against hangs, not a timing. */
async function until(condition: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await sleep(10);
  }
}

describe('one instance of three killed under steady load', () => {
  it('GETs see no error; only POSTs already sent to it fail; none is delivered twice', async () => {
    const dead = pets[1]!;
    const getClients = 3;
    const postClients = 3;
    // Counted in answers, not time, so that a slow machine sees the same phases: steady load,
    // the kill, then load on the two left.
    let answered = 0;
    let stopAt = Infinity;
    const counted = async (a: Promise<Answer>) => {
      const answer = await a;
      answered++;
      return answer;
    };
    const stop = () => answered >= stopAt;
    const load = Promise.all([
      steady(getClients, (c) => counted(stack.request('GET', `/v1/pets/${c}`)), stop),
      steady(postClients, (c) => counted(stack.request('POST', '/v1/pets', { body: JSON.stringify({ client: c }) })), stop),
    ]);
    // Killed with a GET and a POST read and not yet answered.
    await until(() => answered >= 60 && answering.get(dead)!.includes('GET') && answering.get(dead)!.includes('POST'));
    const hitsBeforeKill = dead.hits.length;
    await dead.kill();
    stopAt = answered + 120;
    const [gets, posts] = await load;
    expect(hitsBeforeKill).toBeGreaterThan(0);

    const lines = await stack.accessLines([...gets, ...posts]);
    const failedGets = gets.filter((a) => a.status !== 200);
    const failedPosts = posts.filter((a) => a.status !== 200);
    const retries = await stack.metric('tollgate_upstream_retries_total', { service: 'pets' });
    const connectRetries = await stack.metric('tollgate_upstream_retries_total', { service: 'pets', reason: 'connect' });
    const closedRetries = await stack.metric('tollgate_upstream_retries_total', { service: 'pets', reason: 'closed' });
    const postsRetried = posts.filter((a) => a.status === 200 && (lines.get(a.id)?.tries ?? 1) > 1).length;
    console.log(
      `kill one of three: ${gets.length} GETs (${failedGets.length} failed), ${posts.length} POSTs (${failedPosts.length} failed: ` +
        `${failedPosts.map((a) => a.status).join(',') || 'none'}), retries ${retries} (connect ${connectRetries}, closed ${closedRetries}), ` +
        `POSTs retried after a refused connection ${postsRetried}, ejections ${await stack.metric('tollgate_upstream_ejections_total', { service: 'pets' })}`,
    );

    expect(gets.length).toBeGreaterThan(30);
    expect(posts.length).toBeGreaterThan(30);
    expect(failedGets).toEqual([]);

    // A failed POST is a 502 of one try that went to the dead instance; a POST client has at most
    // one request in flight, so at most one such failure each.
    for (const failed of failedPosts) {
      expect(failed).toMatchObject({ status: 502, code: 'bad_gateway' });
      expect(lines.get(failed.id)).toMatchObject({ target: dead.url, tries: 1 });
    }
    expect(failedPosts.length).toBeGreaterThanOrEqual(1);
    expect(failedPosts.length).toBeLessThanOrEqual(postClients);

    // Delivered at most once each, and every POST answered 200 exactly once.
    const delivered = deliveries(pets, 'POST');
    for (const [id, n] of delivered) expect(n, id).toBe(1);
    for (const ok of posts.filter((a) => a.status === 200)) expect(delivered.get(ok.id), ok.id).toBe(1);
    // Failed GETs and POSTs were retried (to the instances left), and the dead one was taken out.
    expect(closedRetries).toBeGreaterThanOrEqual(1);
    expect(retries).toBeGreaterThan(0);
    expect(await stack.metric('tollgate_upstream_ejections_total', { service: 'pets', target: dead.url })).toBe(1);
  });

  it('a POST that meets the dead port (refused: it never left) goes to another instance, once', async () => {
    // orders has had no traffic: no pooled connection, so a try on the dead instance is a refused connect.
    await orders[2]!.kill();
    const answers: Answer[] = [];
    // Round robin over three in rotation: one of any three tries goes to the dead instance.
    for (let i = 0; i < 3; i++) answers.push(await stack.request('POST', '/v1/orders', { body: `{"n":${i}}` }));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    const delivered = deliveries(orders, 'POST');
    for (const a of answers) expect(delivered.get(a.id), a.id).toBe(1);
    expect(orders[2]!.hits).toEqual([]);
    const lines = await stack.accessLines(answers);
    expect(answers.filter((a) => lines.get(a.id)?.tries === 2)).toHaveLength(1);
    expect(await stack.metric('tollgate_upstream_retries_total', { service: 'orders', reason: 'connect' })).toBe(1);
  });
});
