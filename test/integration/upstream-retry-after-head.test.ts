import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EdgeStack } from '../helpers/edge-stack.js';
import { headerOf } from '../helpers/raw-client.js';

// An upstream that sends a response head and then closes the connection before its body (a
// crash mid-answer, or a hostile upstream) answered the request: it is not a connection "closed
// before any response byte" (retry-policy.ts), and the GET must not go again. When it did, the
// head's fields stayed set on the client response (fields the gateway set win over the next
// try's), so the retry's body went out under the first head's Content-Length: the rest of it
// was read by the client as a second response on its connection, written by the upstream.

let stack: EdgeStack;

beforeAll(async () => {
  stack = await EdgeStack.start();
});

afterAll(() => stack?.stop());

describe('a response head, then the connection closed', () => {
  it('is not retried, and no field of that head reaches the client', async () => {
    const smuggled = 'HTTP/1.1 200 OK\r\ncontent-length: 8\r\nx-smuggled: yes\r\n\r\nsmuggled';
    const second = 'hello' + smuggled;
    // By target, not by arrival: the gateway works on pipelined requests side by side, and on a
    // loaded machine the second may reach the upstream first.
    stack.upstream.respond = (request, socket) => {
      if (request.target === '/v1/pets') return void socket.end('HTTP/1.1 200 OK\r\ncontent-length: 5\r\nx-stale: first\r\n\r\n');
      socket.write(`HTTP/1.1 200 OK\r\ncontent-length: ${second.length}\r\nx-second: yes\r\n\r\n${second}`);
    };
    const result = await stack.send([`GET /v1/pets HTTP/1.1\r\n${stack.auth}\r\n`, `GET /v1/pets/next HTTP/1.1\r\n${stack.auth}\r\n`], {
      finalResponses: 2,
      boundMs: 3_000,
    });
    const first = result.responses[0];
    expect(headerOf(first, 'x-stale')).toBeUndefined();
    expect(first?.status).toBe(502);
    // The client's second request got the upstream's answer to it, not a response framed from
    // bytes of the first one's body.
    expect(result.responses.map((r) => r.status)).toEqual([502, 200]);
    expect(result.responses.some((r) => headerOf(r, 'x-smuggled') !== undefined)).toBe(false);
    expect(headerOf(result.responses[1], 'x-second')).toBe('yes');
    // Each once: the first was not tried again (in whichever order the two reached the upstream).
    expect(stack.upstream.requests.map((r) => r.target).sort()).toEqual(['/v1/pets', '/v1/pets/next']);
  });
});
