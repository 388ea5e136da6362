import type { Socket } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { EdgeStack } from '../helpers/edge-stack.js';

// No byte stream from an upstream (or a client) ends the gateway process. Each case ends only
// its own exchange — 502 before the response started, a truncated response after — and the
// gateway then serves the next request (regression: bytes past an upstream response on a
// keep-alive socket crashed the process with ERR_STREAM_WRITE_AFTER_END).

let stack: EdgeStack;
beforeAll(async () => {
  stack = await EdgeStack.start();
});
afterAll(async () => stack?.stop());
beforeEach(() => stack.upstream.reset());

async function expectStillServing() {
  stack.upstream.reset();
  await stack.sentinel();
  expect(stack.gateway.process.child.exitCode).toBeNull();
}

const get = () => stack.send([`GET /v1/categories HTTP/1.1\r\n${stack.auth}\r\n`], { waitForClose: false });

describe('an upstream that misbehaves before its response starts gives 502 bad_gateway', () => {
  it.each<[string, (socket: Socket) => void]>([
    ['reset before the head', (s) => s.resetAndDestroy()],
    ['reset during the head', (s) => s.write('HTTP/1.1 200 OK\r\nContent-Ty', () => s.resetAndDestroy())],
    ['close with no response', (s) => s.end()],
    ['an invalid status line', (s) => s.write('HTTP/1.1 abc\r\n\r\n')],
    ['oversized headers', (s) => s.write(`HTTP/1.1 200 OK\r\nX-Big: ${'a'.repeat(100_000)}\r\n\r\n`)],
    ['a flood of 1xx interim responses', (s) => s.write('HTTP/1.1 102 Processing\r\n\r\n'.repeat(50))],
    [
      'an unrequested 101 Switching Protocols',
      (s) => s.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: evil\r\nConnection: upgrade\r\n\r\n'),
    ],
    ['two Content-Lengths', (s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}')],
    // RFC 9110 §8.6 lets a recipient either reject these or read them as 2; tollgate rejects them,
    // as nginx and Node's own parser do (docs/security.md).
    ['one length listed twice (2, 2)', (s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\n{}')],
    ['two equal Content-Lengths', (s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}')],
    [
      'Content-Length and Transfer-Encoding',
      (s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n'),
    ],
  ])('%s', async (_name, misbehave) => {
    stack.upstream.respond = (_request, socket) => misbehave(socket);
    const result = await get();
    expect(result.responses.at(-1)?.status).toBe(502);
    expect(JSON.parse(result.responses.at(-1)!.body)).toMatchObject({ code: 'bad_gateway', status: 502 });
    await expectStillServing();
  });
});

describe('interim responses before the final one (RFC 9110 §15.2)', () => {
  it('a 102 Processing and a 103 Early Hints are read past: the final response reaches the client, they do not', async () => {
    stack.upstream.respond = (_request, socket) =>
      socket.write(
        'HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n' +
          'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"ok":true}',
      );
    const result = await get();
    expect(result.raw).toMatch(/^HTTP\/1\.1 200 /);
    expect(result.responses).toHaveLength(1);
    expect(result.responses[0]!.body).toBe('{"ok":true}');
  });

  // The gateway never sends Expect upstream (it answers a client's itself), so a 100 answers
  // nothing it asked. undici's HTTP/1.1 client refuses one ("bad response") and tollgate runs
  // undici as published (no patched dependency in the package): a documented 502, not a hang,
  // and never relayed or sent again (docs/security.md).
  it('an unsolicited 100 Continue is 502 bad_gateway, not relayed and not retried, and the gateway serves on', async () => {
    stack.upstream.respond = (_request, socket) =>
      socket.write('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}');
    const result = await get();
    expect(result.responses.map((r) => r.status)).toEqual([502]);
    expect(result.raw).not.toContain('100 Continue');
    expect(JSON.parse(result.responses[0]!.body)).toMatchObject({ code: 'bad_gateway', status: 502 });
    expect(stack.upstream.requests.filter((r) => r.target === '/v1/categories')).toHaveLength(1);
    await expectStillServing();
  });

  it('interim responses do not stretch the service timeout: a 102 every second, then 200, is 504 at timeoutMs', async () => {
    // undici restarts its header timer on every 1xx; the gateway's own deadline holds (1.5 s here).
    stack.upstream.respond = (_request, socket) => {
      let sent = 0;
      const next = () => {
        if (socket.destroyed) return;
        if (sent++ < 6) {
          socket.write('HTTP/1.1 102 Processing\r\n\r\n');
          setTimeout(next, 1000);
        } else socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}');
      };
      next();
    };
    const result = await get();
    expect(result.responses.map((r) => r.status)).toEqual([504]);
    expect(JSON.parse(result.responses[0]!.body)).toMatchObject({ code: 'gateway_timeout' });
  });
});

describe('an upstream that misbehaves after its response started ends only that exchange', () => {
  it('reset during the body: the client sees a truncated response and a closed connection', async () => {
    stack.upstream.respond = (_request, socket) =>
      socket.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"partial":', () => socket.resetAndDestroy());
    const result = await stack.send([`GET /v1/categories HTTP/1.1\r\n${stack.auth}\r\n`], { waitForClose: true });
    expect(result.raw).toMatch(/^HTTP\/1\.1 200/);
    expect(result.responses.filter((r) => r.status === 200 && r.body.length === 100)).toEqual([]);
    expect(result.closed).toBe(true);
    expect(await stack.metrics()).toMatch(/tollgate_exchange_errors_total\{side="upstream"\} [1-9]/);
    await expectStillServing();
  });

  it('bytes past Content-Length that frame no response do not crash the process (ERR_STREAM_WRITE_AFTER_END on main)', async () => {
    stack.upstream.respond = (_request, socket, index) =>
      socket.write(
        index === 0
          ? 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}garbage-not-http\r\n\r\n'
          : 'HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nfine',
      );
    const first = await get();
    expect(first.responses[0]?.status).toBe(200);
    expect(first.responses[0]?.body).toBe('{}');
    for (let i = 0; i < 3; i++) expect((await get()).responses[0]?.body).toBe('fine');
    expect(await stack.metrics()).toMatch(/tollgate_upstream_errors_total\{kind="after_response"\} [1-9]/);
    await expectStillServing();
  });

  it('bytes past Content-Length on a keep-alive socket do not crash the process, and never reach another client', async () => {
    stack.upstream.respond = (_request, socket, index) => {
      if (index === 0) socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\npoisoned');
      else socket.write('HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nfine');
    };
    const first = await get();
    expect(first.responses[0]?.status).toBe(200);
    expect(first.responses[0]?.body).toBe('{}');
    for (let i = 0; i < 3; i++) {
      const next = await get();
      expect(next.responses[0]?.body).toBe('fine');
    }
    // Node drops an upstream socket that answers twice, so the extra bytes never frame a response.
    await expectStillServing();
  });
});

describe('a client that breaks its own request mid-body', () => {
  it('an invalid chunk after the request was forwarded ends that exchange only', async () => {
    const result = await stack.send(
      [`POST /v1/categories HTTP/1.1\r\n${stack.auth}Transfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n`, 'zz\r\nnot a chunk\r\n'],
      {
        waitForClose: true,
      },
    );
    expect(result.closed).toBe(true);
    await expectStillServing();
  });
});
