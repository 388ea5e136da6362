import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CountingTarget } from '../helpers/counting-targets.js';
import { answerStatus, deliveries, ServicesStack, type Answer } from '../helpers/services-stack.js';

// Idempotency-Key (issue 22, item 4): on a service with `retries.idempotencyKey: true`, a POST
// that carries the header is repeatable, so a 503 from its first target sends it to another one.
// Without the opt-in, or without the header, it is not: the 503 is relayed and the POST reached
// one target once.

const keyed = [new CountingTarget('keyed-a'), new CountingTarget('keyed-b')];
const plain = [new CountingTarget('plain-a'), new CountingTarget('plain-b')];
let stack: ServicesStack;

beforeAll(async () => {
  // The first target of each answers 503 to everything, the second echoes.
  keyed[0]!.behaviour = answerStatus(keyed[0]!, 503);
  plain[0]!.behaviour = answerStatus(plain[0]!, 503);
  stack = await ServicesStack.start(
    [...keyed, ...plain],
    () => `
services:
  - name: keyed
    paths: [/v1/keyed]
    targets: [${keyed.map((t) => t.url).join(', ')}]
    retries: { idempotencyKey: true }
    ejection: { consecutiveFailures: 1000 }
  - name: plain
    paths: [/v1/plain]
    targets: [${plain.map((t) => t.url).join(', ')}]
    ejection: { consecutiveFailures: 1000 }
`,
    'idem',
  );
});

afterAll(() => stack?.close());

/** Four POSTs one after another: round robin over two sends two of them to the 503 target first. */
async function posts(path: string, headers: (i: number) => Record<string, string>): Promise<Answer[]> {
  const answers: Answer[] = [];
  for (let i = 0; i < 4; i++) answers.push(await stack.request('POST', path, { body: `{"n":${i}}`, headers: headers(i) }));
  return answers;
}

function expectRelayedOnce(answers: Answer[], targets: CountingTarget[]): void {
  const failing = targets[0]!;
  const refused = answers.filter((a) => a.status === 503);
  expect(refused.length).toBeGreaterThanOrEqual(1);
  for (const a of refused) expect(a.target).toBe(failing.name);
  for (const a of answers.filter((x) => x.status !== 503)) expect(a).toMatchObject({ status: 200, target: targets[1]!.name });
  const delivered = deliveries(targets, 'POST');
  for (const a of answers) expect(delivered.get(a.id), a.id).toBe(1);
}

describe('POST with Idempotency-Key', () => {
  it('on a service that opts in, a POST with the header that meets a 503 goes to the other target', async () => {
    const answers = await posts('/v1/keyed', (i) => ({ 'idempotency-key': `order-${i}` }));
    for (const a of answers) expect(a).toMatchObject({ status: 200, target: 'keyed-b' });
    const first = new Set(keyed[0]!.hitsOf('POST').map((h) => h.requestId));
    expect(first.size).toBeGreaterThanOrEqual(1);
    // Each POST reached the 503 target at most once and the other exactly once.
    const atB = deliveries([keyed[1]!], 'POST');
    for (const a of answers) expect(atB.get(a.id), a.id).toBe(1);
    for (const [id, n] of deliveries([keyed[0]!], 'POST')) expect(n, id).toBe(1);
    expect(await stack.metric('tollgate_upstream_retries_total', { service: 'keyed', reason: 'status' })).toBe(first.size);
  });

  it('on a service that opts in, a POST without the header is not retried: the 503 is relayed', async () => {
    const before = keyed.map((t) => t.hits.length);
    expectRelayedOnce(await posts('/v1/keyed', () => ({})), keyed);
    expect(keyed.map((t, i) => t.hits.length - before[i]!)).toEqual([2, 2]);
  });

  it('on a service that does not opt in, a POST with the header is not retried: the 503 is relayed', async () => {
    expectRelayedOnce(await posts('/v1/plain', (i) => ({ 'idempotency-key': `order-${i}` })), plain);
    expect(await stack.metric('tollgate_upstream_retries_total', { service: 'plain' })).toBe(0);
  });

  it('a GET on the same service is retried (the 503 is one a retry may cure)', async () => {
    for (let i = 0; i < 4; i++) expect(await stack.request('GET', `/v1/plain/${i}`)).toMatchObject({ status: 200, target: 'plain-b' });
  });
});
