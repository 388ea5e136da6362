import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { EdgeStack } from '../helpers/edge-stack.js';
import { headerOf } from '../helpers/raw-client.js';

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
    const result = await stack.send([`${valid('a')}${valid('b')}${valid('c')}GET /v1/d HTTP/1.1\r\n${stack.auth}X-Bad : 1\r\n\r\n`], {
      waitForClose: true,
    });
    expect(result.closed).toBe(true);
    await stack.sentinel();
    expect(stack.targets()).toEqual(['GET /v1/sentinel']);
    for (const request of stack.upstream.requests) expect(stack.upstream.header(request, 'x-forwarded-for')).toEqual(['127.0.0.1']);
  });
});

describe('gateway-owned header names spelled with underscores', () => {
  // CGI-style servers (PHP-FPM, WSGI, Rack, …) map `-` and `_` to the same variable (HTTP_X_FORWARDED_FOR):
  // a client's `X_Forwarded_For` there is indistinguishable from the gateway's `X-Forwarded-For`.
  it.each([
    'X_Forwarded_For: 6.6.6.6',
    'X_Forwarded_Host: evil.test',
    'X_Tollgate_Consumer_Id: someone-else',
    'X_Tollgate_Plan: enterprise',
    'X_Tollgate_Assertion: forged',
    'X_Request_Id: forged-request-id',
    'Transfer_Encoding: chunked',
    'Content_Length: 5',
    'X-Forwarded_Proto: https',
  ])('%s never reaches the upstream', async (field) => {
    const result = await stack.send([`GET /v1/categories HTTP/1.1\r\n${stack.auth}${field}\r\n\r\n`]);
    expect(result.responses[0]?.status).toBe(200);
    const names = stack.upstream.requests[0]!.headers.map(([name]) => name);
    expect(names.filter((name) => name.includes('_'))).toEqual([]);
  });

  it('an ordinary header with an underscore still passes', async () => {
    await stack.send([`GET /v1/categories HTTP/1.1\r\n${stack.auth}X_Api_Version: 2\r\n\r\n`]);
    expect(stack.upstream.header(stack.upstream.requests[0]!, 'x_api_version')).toEqual(['2']);
  });
});

describe('headers that make upstream frameworks route another path or method than the policies saw', () => {
  // Symfony/Laminas/IIS URL Rewrite take the path from X-Original-URL / X-Rewrite-URL; Express's
  // method-override, Rails, Spring's HiddenHttpMethodFilter-likes take the method from these.
  it.each([
    'X-Original-URL: /v1/pets/42',
    'X-Rewrite-URL: /v1/pets/42',
    'X-HTTP-Method-Override: DELETE',
    'X-HTTP-Method: DELETE',
    'X-Method-Override: DELETE',
  ])('%s is not forwarded', async (field) => {
    const result = await stack.send([`POST /v1/categories HTTP/1.1\r\n${stack.auth}${field}\r\nContent-Length: 2\r\n\r\n{}`]);
    expect(result.responses[0]?.status).toBe(200);
    const name = field.slice(0, field.indexOf(':')).toLowerCase();
    expect(stack.upstream.header(stack.upstream.requests[0]!, name)).toEqual([]);
  });
});

describe('route rules against upstreams that route case-insensitively (Express, ASP.NET Core, IIS)', () => {
  it.each(['/V1/PETS/42', '/v1/Pets/42', '/V1/pets/42/'])('%s carries the deprecation headers of GET /v1/pets/{petId}', async (target) => {
    const result = await stack.send([`GET ${target} HTTP/1.1\r\n${stack.auth}\r\n`]);
    expect(result.responses[0]?.status).toBe(200);
    expect(headerOf(result.responses[0], 'deprecation')).toMatch(/^@\d+$/);
    expect(stack.targets()).toEqual([`GET ${target}`]);
  });
});
