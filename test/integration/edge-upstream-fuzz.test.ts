import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EdgeStack } from '../helpers/edge-stack.js';
import { headerOf } from '../helpers/raw-client.js';

// Property-based fuzzing of the response path: the upstream answers each request with a valid
// response mutated byte-wise (cut short, bytes inserted, garbage or a second response appended,
// 1xx prefixes, duplicated framing headers), then closes the connection. Invariants:
// 1. the gateway process stays up;
// 2. every client gets a response or a closed connection, never a hang (bounded by the exchange);
// 3. what a client receives is the answer to its own request, whole or cut short: a second
//    response the upstream appended never reaches anyone.
// FUZZ_RUNS scales it like the request fuzz (`npm run fuzz` runs that one; this one runs in CI).

const RUNS = Math.ceil(Number(process.env.FUZZ_RUNS ?? 3000) / 6);

let stack: EdgeStack;
beforeAll(async () => {
  stack = await EdgeStack.start();
});
afterAll(async () => stack?.stop());

const mutation = fc.record({
  kind: fc.constantFrom(
    'none',
    'cut',
    'insert',
    'append-garbage',
    'append-response',
    'interim',
    'duplicate-length',
    'chunked',
    'bad-chunk',
  ),
  at: fc.nat(),
  bytes: fc.uint8Array({ minLength: 1, maxLength: 8 }),
  count: fc.integer({ min: 1, max: 12 }),
});
type Mutation = typeof mutation extends fc.Arbitrary<infer T> ? T : never;

function responseFor(requestId: string, m: Mutation): Buffer {
  const body = JSON.stringify({ requestId });
  const base = Buffer.from(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
  const at = m.at % (base.length + 1);
  // Bytes are inserted into the head only, so a body that arrives is ours, whole or cut short.
  const inHead = m.at % (base.length - body.length);
  switch (m.kind) {
    case 'cut':
      return base.subarray(0, at);
    case 'insert':
      return Buffer.concat([base.subarray(0, inHead), m.bytes, base.subarray(inHead)]);
    case 'append-garbage':
      return Buffer.concat([base, m.bytes]);
    case 'append-response':
      return Buffer.concat([base, Buffer.from(`HTTP/1.1 200 OK\r\ncontent-length: 21\r\n\r\n{"requestId":"other"}`)]);
    case 'interim':
      return Buffer.concat([Buffer.from('HTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\n'.repeat(m.count)), base]);
    case 'duplicate-length':
      return Buffer.from(`HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\ncontent-length: ${body.length + m.count}\r\n\r\n${body}`);
    case 'chunked':
      return Buffer.from(`HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`);
    case 'bad-chunk':
      return Buffer.from(`HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n${body}\r\n0\r\n\r\n`);
    case 'none':
      return base;
  }
}

describe('upstream response fuzz (fast-check)', () => {
  it(`keeps its invariants over ${RUNS} mutated upstream responses`, { timeout: 300_000 }, async () => {
    let n = 0;
    await fc.assert(
      fc.asyncProperty(mutation, async (m) => {
        stack.upstream.respond = (request, socket) => {
          const id = request.headers.find(([name]) => name === 'x-request-id')?.[1] ?? '';
          socket.end(responseFor(id, m));
        };
        const requestId = `resp-fuzz-${++n}`;
        const result = await stack.send([`GET /v1/categories HTTP/1.1\r\n${stack.auth}X-Request-Id: ${requestId}\r\n\r\n`], {
          boundMs: 5000,
        });
        expect(result.responses.length > 0 || result.closed, `no answer and no close for ${JSON.stringify(m)}`).toBe(true);
        const final = result.responses.find((r) => r.status >= 200);
        // Whatever body arrives names no other request (complete ids end with a quote).
        if (final) {
          expect(final.body).not.toContain('"other"');
          for (const [id] of final.body.matchAll(/resp-fuzz-\d+(?=")/g)) expect(id).toBe(requestId);
        }
        if (final) expect(headerOf(final, 'x-request-id')).toBe(requestId);
        expect(stack.gateway.process.child.exitCode).toBeNull();
      }),
      { numRuns: RUNS, endOnFailure: true },
    );
    stack.upstream.reset();
    await stack.sentinel();
  });
});
