import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { EdgeStack } from '../helpers/edge-stack.js';

// A second pair of eyes on the edge (after issue 11): attacks that got through, one test each,
// named after the attack. Same rig as the other edge tests: a real gateway process in front of a
// RecordingUpstream that records the exact bytes it receives.

let stack: EdgeStack;
beforeAll(async () => {
  stack = await EdgeStack.start();
});
afterAll(async () => stack?.stop());
beforeEach(() => stack.upstream.reset());

describe('pipelined requests, then a malformed one that makes the gateway drop the connection', () => {
  it('the requests still in the policy chain are not forwarded for a client that is gone (nor with an empty X-Forwarded-For)', async () => {
    // One write: the parser emits the three requests and then fails on the fourth in the same tick,
    // so the socket is destroyed while every request still awaits its quota decision from Redis.
    const valid = (name: string) => `GET /v1/${name} HTTP/1.1\r\n${stack.auth}\r\n`;
    const result = await stack.send([`${valid('a')}${valid('b')}${valid('c')}GET /v1/d HTTP/1.1\r\n${stack.auth}X-Bad : 1\r\n\r\n`], { waitForClose: true });
    expect(result.closed).toBe(true);
    await stack.sentinel();
    expect(stack.targets()).toEqual(['GET /v1/sentinel']);
    for (const request of stack.upstream.requests) expect(stack.upstream.header(request, 'x-forwarded-for')).toEqual(['127.0.0.1']);
  });
});
