import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { EdgeStack } from '../helpers/edge-stack.js';
import { okResponder as okRespond, type RecordedRequest } from '../helpers/recording-upstream.js';

// Request smuggling: one client request must reach the upstream as exactly one request, framed so
// the upstream cannot read it as two. Each payload carries a complete second request in its body;
// the RecordingUpstream frames the bytes it receives itself, so a smuggled request would show up
// as an extra request (or as garbage) before the sentinel.

let stack: EdgeStack;
const SMUGGLED = 'GET /v1/smuggled HTTP/1.1\r\nHost: upstream\r\n\r\n';

beforeAll(async () => {
  stack = await EdgeStack.start();
});
afterAll(async () => stack?.stop());
beforeEach(() => stack.upstream.reset());

const chunked = (payload: string) => `${Buffer.byteLength(payload).toString(16)}\r\n${payload}\r\n0\r\n\r\n`;

async function expectOneUpstreamRequest(method: string, target: string, body: string) {
  await stack.sentinel();
  expect(stack.targets()).toEqual([`${method} ${target}`, 'GET /v1/sentinel']);
  expect(stack.upstream.garbage).toEqual([]);
  expect(stack.upstream.requests[0]!.body.toString()).toBe(body);
}

/**
 * A body reaches the upstream framed exactly once: chunked, or with a Content-Length equal to its
 * length (a chunked body that arrived in full before it was forwarded is sent with its length).
 */
function expectFramedOnce(request: RecordedRequest, body: string) {
  const te = stack.upstream.header(request, 'transfer-encoding');
  const cl = stack.upstream.header(request, 'content-length');
  if (te.length > 0) {
    expect(te).toEqual(['chunked']);
    expect(cl).toEqual([]);
  } else {
    expect(cl).toEqual([String(Buffer.byteLength(body))]);
  }
}

describe('smuggling through a body on a method without one', () => {
  it.each(['DELETE', 'OPTIONS', 'GET'])('a chunked body on %s is forwarded framed, as one request', async (method) => {
    const result = await stack.send([
      `${method} /v1/categories/1 HTTP/1.1\r\n${stack.auth}Transfer-Encoding: chunked\r\n\r\n${chunked(SMUGGLED)}`,
    ]);
    expect(result.responses.at(-1)?.status).toBe(200);
    await expectOneUpstreamRequest(method, '/v1/categories/1', SMUGGLED);
    expectFramedOnce(stack.upstream.requests[0]!, SMUGGLED);
  });

  it.each(['DELETE', 'POST'])('a chunked body on %s still arriving when forwarded stays chunked', async (method) => {
    const first = chunked(SMUGGLED).replace(/0\r\n\r\n$/, '');
    const result = await stack.send(
      [`${method} /v1/categories/1 HTTP/1.1\r\n${stack.auth}Transfer-Encoding: chunked\r\n\r\n${first}`, '0\r\n\r\n'],
      { gapMs: 150 },
    );
    expect(result.responses.at(-1)?.status).toBe(200);
    await expectOneUpstreamRequest(method, '/v1/categories/1', SMUGGLED);
    expect(stack.upstream.header(stack.upstream.requests[0]!, 'transfer-encoding')).toEqual(['chunked']);
    expect(stack.upstream.header(stack.upstream.requests[0]!, 'content-length')).toEqual([]);
  });

  it.each(['DELETE', 'OPTIONS', 'GET'])('a Content-Length body on %s is forwarded with its length', async (method) => {
    await stack.send([`${method} /v1/categories/1 HTTP/1.1\r\n${stack.auth}Content-Length: ${SMUGGLED.length}\r\n\r\n${SMUGGLED}`]);
    await expectOneUpstreamRequest(method, '/v1/categories/1', SMUGGLED);
    expect(stack.upstream.header(stack.upstream.requests[0]!, 'content-length')).toEqual([String(SMUGGLED.length)]);
  });
});

describe('smuggling by listing a framing header in Connection', () => {
  it.each(['GET', 'HEAD', 'DELETE', 'OPTIONS'])('Connection: content-length on %s cannot strip the length of the body', async (method) => {
    const result = await stack.send(
      [
        `${method} /v1/categories HTTP/1.1\r\n${stack.auth}Connection: keep-alive, content-length\r\nContent-Length: ${SMUGGLED.length}\r\n\r\n${SMUGGLED}`,
      ],
      { head: method === 'HEAD' },
    );
    expect(result.responses.at(-1)?.status).toBe(200);
    await expectOneUpstreamRequest(method, '/v1/categories', SMUGGLED);
  });

  it.each(['GET', 'DELETE'])('Connection: transfer-encoding on %s cannot strip the chunking of the body', async (method) => {
    await stack.send([
      `${method} /v1/categories HTTP/1.1\r\n${stack.auth}Connection: transfer-encoding\r\nTransfer-Encoding: chunked\r\n\r\n${chunked(SMUGGLED)}`,
    ]);
    await expectOneUpstreamRequest(method, '/v1/categories', SMUGGLED);
  });
});

describe('smuggling past the header-count limit', () => {
  it.each([101, 1001])('%i header fields before Content-Length: 431 with an Error body, nothing reaches the upstream', async (fields) => {
    const filler = Array.from({ length: fields }, (_, i) => `x-f${i}: 1\r\n`).join('');
    const result = await stack.send(
      [`GET /v1/categories HTTP/1.1\r\n${stack.auth}${filler}Content-Length: ${SMUGGLED.length}\r\n\r\n${SMUGGLED}`],
      { waitForClose: true },
    );
    expect(result.responses[0]?.status).toBe(431);
    expect(JSON.parse(result.responses[0]!.body)).toEqual({
      code: 'request_header_fields_too_large',
      message: expect.stringMatching(/100 header fields/),
      status: 431,
    });
    expect(result.closed).toBe(true);
    await stack.sentinel();
    expect(stack.targets()).toEqual(['GET /v1/sentinel']);
  });

  it('accepts a request with exactly the allowed number of fields', async () => {
    const filler = Array.from({ length: 98 }, (_, i) => `x-f${i}: 1\r\n`).join(''); // + Host + Authorization = 100
    const result = await stack.send([`GET /v1/categories HTTP/1.1\r\n${stack.auth}${filler}\r\n`]);
    expect(result.responses[0]?.status).toBe(200);
  });
});

describe('ambiguous framing is refused with 400 and an Error body, and closes the connection', () => {
  it.each([
    ['two Host headers', 'Host: a.test\r\nHost: b.test\r\nContent-Length: 2\r\n', '{}'],
    ['Transfer-Encoding other than a single chunked', 'Host: a.test\r\nTransfer-Encoding: gzip, chunked\r\n', '0\r\n\r\n'],
    ['Transfer-Encoding twice', 'Host: a.test\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n', '0\r\n\r\n'],
    ['Content-Length and Transfer-Encoding', 'Host: a.test\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n', '0\r\n\r\n'],
    ['two different Content-Lengths', 'Host: a.test\r\nContent-Length: 2\r\nContent-Length: 3\r\n', '{}'],
    ['a Content-Length that is not a number', 'Host: a.test\r\nContent-Length: +2\r\n', '{}'],
  ])('%s', async (_name, fields, body) => {
    const result = await stack.send([`POST /v1/categories HTTP/1.1\r\nAuthorization: Bearer ${stack.key.key}\r\n${fields}\r\n${body}`], {
      waitForClose: true,
    });
    expect(result.responses.map((r) => r.status)).toEqual([400]);
    expect(JSON.parse(result.responses[0]!.body)).toMatchObject({ code: 'bad_request', status: 400 });
    expect(result.closed).toBe(true);
    await stack.sentinel();
    expect(stack.targets()).toEqual(['GET /v1/sentinel']);
  });

  it('Transfer-Encoding in HTTP/1.0', async () => {
    const result = await stack.send(
      [`POST /v1/categories HTTP/1.0\r\n${stack.auth}Transfer-Encoding: chunked\r\n\r\n${chunked(SMUGGLED)}`],
      { waitForClose: true },
    );
    expect(result.responses[0]?.status).toBe(400);
    await stack.sentinel();
    expect(stack.targets()).toEqual(['GET /v1/sentinel']);
  });
});

describe('response desync through a malformed pipelined request', () => {
  it('a malformed request pipelined behind a proxied one is never answered in its place', async () => {
    // The upstream answers late, so the gateway parses the malformed request while the first is in flight.
    stack.upstream.respond = (request, socket, index) => setTimeout(() => okRespond(request, socket, index), 100);
    const result = await stack.send([`GET /v1/categories HTTP/1.1\r\n${stack.auth}\r\nNOT HTTP AT ALL\r\n\r\n`], { waitForClose: true });
    // Either the real answer to the first request, or a closed connection: never a 400 in its place.
    expect(result.responses.map((r) => r.status).filter((s) => s !== 200)).toEqual([]);
    await stack.sentinel();
  });
});

describe('requests without a body', () => {
  // The upstream request head is handed to Node as a field list (proxy.ts), written before the
  // body is known to be empty: an empty body must still be said as one, never left to chunking.
  it.each(['POST', 'PUT', 'PATCH'])('%s without a body reaches the upstream with Content-Length: 0, not chunked', async (method) => {
    await stack.send([`${method} /v1/categories HTTP/1.1\r\n${stack.auth}\r\n`]);
    await expectOneUpstreamRequest(method, '/v1/categories', '');
    const forwarded = stack.upstream.requests[0]!;
    expect(stack.upstream.header(forwarded, 'content-length')).toEqual(['0']);
    expect(stack.upstream.header(forwarded, 'transfer-encoding')).toEqual([]);
  });

  it.each(['GET', 'HEAD', 'DELETE', 'OPTIONS'])('%s without a body reaches the upstream with no framing field at all', async (method) => {
    await stack.send([`${method} /v1/categories HTTP/1.1\r\n${stack.auth}\r\n`], { head: method === 'HEAD' });
    await expectOneUpstreamRequest(method, '/v1/categories', '');
    const forwarded = stack.upstream.requests[0]!;
    expect(stack.upstream.header(forwarded, 'content-length')).toEqual([]);
    expect(stack.upstream.header(forwarded, 'transfer-encoding')).toEqual([]);
  });

  it('a repeated field reaches the upstream with every value, in order', async () => {
    await stack.send([`GET /v1/categories HTTP/1.1\r\n${stack.auth}Cookie: a=1\r\nCookie: b=2\r\nAccept: x/y\r\nAccept: z/w\r\n\r\n`]);
    await expectOneUpstreamRequest('GET', '/v1/categories', '');
    const forwarded = stack.upstream.requests[0]!;
    expect(stack.upstream.header(forwarded, 'cookie')).toEqual(['a=1; b=2']);
    expect(stack.upstream.header(forwarded, 'accept')).toEqual(['x/y, z/w']);
  });
});
