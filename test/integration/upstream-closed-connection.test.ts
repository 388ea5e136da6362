import type { Socket } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { EdgeStack } from '../helpers/edge-stack.js';
import { okResponder, type Responder } from '../helpers/recording-upstream.js';

// A kept-alive upstream connection closed by the upstream just as a request is written to it (an
// idle timeout racing the reuse, a restart) is the gateway's problem, not the client's: an
// idempotent request whose body can go again (none, untouched, or kept whole) goes once more on a
// new connection (src/upstream/retry-policy.ts); anything else gets the 502 it always got, and is never
// delivered twice. The upstream here answers the first request of each connection and closes the
// connection, unanswered, when a second one arrives on it: the race, made deterministic.

let stack: EdgeStack;

beforeAll(async () => {
  stack = await EdgeStack.start();
});

afterAll(async () => {
  await stack?.stop();
});

/** Answers the first request of every connection; closes the connection on any later one. */
function closesReusedConnections(): Responder {
  const served = new WeakMap<Socket, number>();
  return (request, socket, index) => {
    const n = served.get(socket) ?? 0;
    served.set(socket, n + 1);
    if (n === 0) okResponder(request, socket, index);
    else socket.destroy();
  };
}

const retries = async () =>
  Number(/^tollgate_upstream_retries_total\{service="default",reason="closed"\} (\d+)/m.exec(await stack.metrics())?.[1] ?? 0);

/** One request on its own client connection; the gateway's pool keeps its upstream connection. */
async function send(method: string, extra = '', body = '') {
  const length = body || ['POST', 'PUT', 'PATCH'].includes(method) ? `Content-Length: ${Buffer.byteLength(body)}\r\n` : '';
  const result = await stack.send([`${method} /v1/things HTTP/1.1\r\n${stack.auth}${extra}${length}\r\n${body}`], {
    head: method === 'HEAD',
  });
  return result.responses.at(-1)?.status;
}

/** How often the upstream saw requests of `method`. */
const seen = (method: string) => stack.upstream.requests.filter((r) => r.method === method).length;

beforeEach(async () => {
  stack.upstream.reset();
  stack.upstream.respond = closesReusedConnections();
  // One pooled connection that has served a request: the next request reuses it.
  expect(await send('GET')).toBe(200);
  stack.upstream.requests.length = 0;
});

describe('a reused upstream connection found closed', () => {
  it.each(['GET', 'HEAD', 'OPTIONS', 'DELETE'])('%s goes once more on a new connection and succeeds', async (method) => {
    const before = await retries();
    expect(await send(method)).toBe(200);
    expect(seen(method)).toBe(2);
    expect(await retries()).toBe(before + 1);
  });

  it('a PUT without a body goes once more', async () => {
    expect(await send('PUT')).toBe(200);
    expect(seen('PUT')).toBe(2);
  });

  it('a PUT whose small body was kept whole goes once more, with that body', async () => {
    expect(await send('PUT', 'Content-Type: application/json\r\n', '{"name":"x"}')).toBe(200);
    expect(stack.upstream.requests.filter((r) => r.method === 'PUT').map((r) => r.body.toString())).toEqual([
      '{"name":"x"}',
      '{"name":"x"}',
    ]);
  });

  it('a PUT whose body is larger than what is kept (64 KiB) is not sent again: 502, delivered once', async () => {
    expect(await send('PUT', 'Content-Type: application/octet-stream\r\n', 'p'.repeat(64 * 1024 + 1))).toBe(502);
    expect(seen('PUT')).toBe(1);
  });

  it('a POST is never sent again: 502, delivered once', async () => {
    const before = await retries();
    expect(await send('POST', 'Content-Type: application/json\r\n', '{"name":"x"}')).toBe(502);
    expect(seen('POST')).toBe(1);
    expect(await retries()).toBe(before);
  });

  it('a bodiless POST is not sent again either (not idempotent)', async () => {
    expect(await send('POST')).toBe(502);
    expect(seen('POST')).toBe(1);
  });

  it('a GET is sent at most twice: a new connection closed too gives 502', async () => {
    stack.upstream.respond = (_request, socket) => socket.destroy();
    expect(await send('GET')).toBe(502);
    expect(seen('GET')).toBe(2);
  });

  it('a response that had started is never replayed: closed mid-response, the client sees it cut', async () => {
    stack.upstream.respond = (_request, socket) => {
      socket.write('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{"partial"');
      setTimeout(() => socket.destroy(), 50);
    };
    await send('GET');
    expect(seen('GET')).toBe(1);
  });
});
