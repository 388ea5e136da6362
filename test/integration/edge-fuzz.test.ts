import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalTarget } from '../../src/http/canonical-target.js';
import { EdgeStack } from '../helpers/edge-stack.js';
import { headerOf } from '../helpers/raw-client.js';

// Property-based fuzzing of the edge: valid requests with their framing, header sets and targets
// mutated. Invariants, whatever the mutation:
// 1. the upstream frames at most one request per client request (a smuggled request, which lacks
//    the gateway's identity headers, or bytes that frame no request at all, fail the run);
// 2. the gateway process stays up;
// 3. every request that reaches the upstream passed the policy chain on the path the upstream
//    received: it carries the identity headers, its target is canonical, and when that path is
//    the deprecated GET /v1/pets/{petId} the client's response carried Deprecation.
// FUZZ_RUNS sets the number of cases (`npm run fuzz` runs many more than CI).

const RUNS = Number(process.env.FUZZ_RUNS ?? 3000);
const SMUGGLED = 'GET /v1/smuggled HTTP/1.1\r\nHost: upstream\r\n\r\n';
const DEPRECATED = /^\/v1\/pets\/[^/]+\/?$/;

let stack: EdgeStack;
beforeAll(async () => {
  stack = await EdgeStack.start();
});
afterAll(async () => stack?.stop());

const method = fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS');
const target = fc.oneof(
  fc.constantFrom(
    '/v1/pets/42',
    '/v1/./pets/42',
    '/v1/x/../pets/42',
    '/v1/%2e/pets/42',
    '//v1/pets/42',
    '/v1/pets/%34%32/',
    '/v1/categories',
    '/v1/pets/42?q=/../x',
  ),
  fc.constantFrom('http://h.test/v1/pets/42', '/v1\\pets/42', '/v1/pets%2f42', '/v1/pets;a/42', '*', '/v1/%zz', '/v1/pets/42#f'),
  fc
    .array(fc.constantFrom('v1', 'pets', '42', '.', '..', '', '%2e', '%2E%2e', 'a%2fb', '%41', ';', '\\'), { minLength: 1, maxLength: 6 })
    .map((s) => '/' + s.join('/')),
);
const framing = fc.constantFrom(
  'none',
  'length',
  'chunked',
  'length+chunked',
  'two-lengths',
  'length-short',
  'te-gzip-chunked',
  'te-Chunked',
  'te-twice',
  'te-space',
);
const connectionList = fc.subarray([
  'close',
  'keep-alive',
  'content-length',
  'transfer-encoding',
  'host',
  'x-request-id',
  'x-tollgate-consumer-id',
  'x-forwarded-for',
  'authorization',
]);
const request = fc.record({
  method,
  target,
  framing,
  connection: connectionList,
  fillerFields: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 5 }), fc.integer({ min: 95, max: 105 })),
  duplicateHost: fc.boolean(),
  http10: fc.boolean(),
  expectContinue: fc.boolean(),
  forged: fc.boolean(),
  body: fc.oneof(fc.constant(SMUGGLED), fc.string({ maxLength: 40 })),
});
type Case = typeof request extends fc.Arbitrary<infer T> ? T : never;

function bytesOf(c: Case, key: string, requestId: string): string {
  const lines = [
    `${c.method} ${c.target} HTTP/1.${c.http10 ? 0 : 1}`,
    'Host: gateway.test',
    `Authorization: Bearer ${key}`,
    `X-Request-Id: ${requestId}`,
  ];
  if (c.duplicateHost) lines.push('Host: other.test');
  for (let i = 0; i < c.fillerFields; i++) lines.push(`x-f${i}: 1`);
  if (c.connection.length) lines.push(`Connection: ${c.connection.join(', ')}`);
  if (c.expectContinue) lines.push('Expect: 100-continue');
  if (c.forged) lines.push('X-Tollgate-Consumer-Id: forged', 'X-Forwarded-For: 6.6.6.6');
  const body = Buffer.from(c.body);
  const chunked = `${body.length.toString(16)}\r\n${c.body}\r\n0\r\n\r\n`;
  let payload = '';
  switch (c.framing) {
    case 'length':
      lines.push(`Content-Length: ${body.length}`);
      payload = c.body;
      break;
    case 'length-short':
      lines.push(`Content-Length: ${Math.max(0, body.length - 3)}`);
      payload = c.body;
      break;
    case 'chunked':
      lines.push('Transfer-Encoding: chunked');
      payload = chunked;
      break;
    case 'length+chunked':
      lines.push(`Content-Length: ${body.length}`, 'Transfer-Encoding: chunked');
      payload = chunked;
      break;
    case 'two-lengths':
      lines.push(`Content-Length: ${body.length}`, `Content-Length: ${body.length + 1}`);
      payload = c.body;
      break;
    case 'te-gzip-chunked':
      lines.push('Transfer-Encoding: gzip, chunked');
      payload = chunked;
      break;
    case 'te-Chunked':
      lines.push('Transfer-Encoding: Chunked');
      payload = chunked;
      break;
    case 'te-twice':
      lines.push('Transfer-Encoding: chunked', 'Transfer-Encoding: chunked');
      payload = chunked;
      break;
    case 'te-space':
      lines.push('Transfer-Encoding : chunked');
      payload = chunked;
      break;
    case 'none':
      payload = '';
      break;
  }
  return `${lines.join('\r\n')}\r\n\r\n${payload}`;
}

describe('edge fuzz (fast-check)', () => {
  it(`keeps its invariants over ${RUNS} mutated requests`, { timeout: 600_000 }, async () => {
    const deprecatedByRequestId = new Map<string, boolean>();
    const perClientRequest = new Map<string, number>();
    let sent = 0;
    let checked = 0;
    /** Invariants 1 and 3 on every request the upstream framed since the last call. */
    const checkUpstream = () => {
      expect(stack.upstream.garbage).toEqual([]);
      for (; checked < stack.upstream.requests.length; checked++) {
        const recorded = stack.upstream.requests[checked]!;
        const header = (name: string) => stack.upstream.header(recorded, name);
        expect(header('x-tollgate-consumer-id'), recorded.raw.toString('latin1')).toEqual([stack.key.id]);
        expect(header('x-tollgate-assertion')).toHaveLength(1);
        const id = header('x-request-id')[0] ?? '';
        perClientRequest.set(id, (perClientRequest.get(id) ?? 0) + 1);
        if (id.startsWith('fuzz-case-')) expect(perClientRequest.get(id), `${id} reached the upstream twice`).toBe(1);
        const canonical = canonicalTarget(recorded.target);
        expect(canonical.ok && canonical.target).toBe(recorded.target);
        const path = recorded.target.split('?')[0]!;
        // Responses cut short by a close were not read; those that were must carry the headers.
        if ((recorded.method === 'GET' || recorded.method === 'HEAD') && DEPRECATED.test(path) && deprecatedByRequestId.has(id)) {
          expect(deprecatedByRequestId.get(id), recorded.target).toBe(true);
        }
      }
    };
    await fc.assert(
      fc.asyncProperty(request, async (c) => {
        // A unique request id per case (the gateway keeps a well-formed one) ties what the upstream
        // framed to the client request it came from, even when it arrives after the client gave up.
        const requestId = `fuzz-case-${++sent}`;
        const result = await stack.send([bytesOf(c, stack.key.key, requestId)], { boundMs: 3000, head: c.method === 'HEAD' });
        for (const response of result.responses) {
          const id = headerOf(response, 'x-request-id');
          if (id) deprecatedByRequestId.set(id, headerOf(response, 'deprecation') !== undefined);
        }
        expect(stack.gateway.process.child.exitCode).toBeNull();
        checkUpstream();
      }),
      // endOnFailure: once the gateway is down every case fails; shrinking would only take time.
      { numRuns: RUNS, seed: process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : undefined, endOnFailure: true },
    );
    // Anything still in flight when its client gave up is framed before the sentinel.
    await stack.sentinel();
    checkUpstream();
    expect(stack.upstream.requests.length).toBeLessThanOrEqual(sent + 1);
  });
});
