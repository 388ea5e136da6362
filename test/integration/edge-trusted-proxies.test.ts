import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, EdgeRulesStack } from '../helpers/edge-rules-stack.js';

// gateway.trustedProxies against a real gateway: loopback aliases stand for a proxy (127.0.0.2,
// trusted) and for clients that reach the port directly (127.0.0.3, 127.0.0.4). Only through the
// proxy does X-Forwarded-For name the client; the global IP rules and the failed-authentication
// limit (per address, its remaining count in the 401's headers) both read that one address.

const PROXY = '127.0.0.2';

const trustingLoopbackProxy = (yaml: string) =>
  yaml
    .replace(/^( {2}trustedProxies: )\[\]/m, `$1[${PROXY}/32, 10.0.0.0/8]`)
    .replace(/^ipRules:[^\n]*\n {2}deny: \[\][^\n]*\n/m, 'ipRules:\n  deny: [203.0.113.0/24]\n');

describe('trusted proxies by network (gateway.trustedProxies)', () => {
  let stack: EdgeRulesStack;
  const unknownKey = { authorization: 'Bearer tg_not_a_key' };
  const remaining = async (from: string, xff?: string) => {
    const reply = await call(`${stack.gateway.url}/v1/categories`, {
      localAddress: from,
      headers: xff === undefined ? unknownKey : { ...unknownKey, 'x-forwarded-for': xff },
    });
    expect(reply.status, reply.body).toBe(401);
    return Number(reply.headers['x-ratelimit-remaining']);
  };

  beforeAll(async () => {
    stack = await EdgeRulesStack.start(trustingLoopbackProxy);
  }, 120_000);
  afterAll(() => stack?.close());

  it('a client connecting directly gets its socket address, whatever X-Forwarded-For it sends', async () => {
    // A denied address the client writes itself proves nothing: it is 127.0.0.3 here.
    const spoofed = await call(`${stack.gateway.url}/v1/openapi.json`, {
      localAddress: '127.0.0.3',
      headers: { 'x-forwarded-for': '203.0.113.5' },
    });
    expect(spoofed.status).toBe(200);
    // Failed authentications count under the socket address, whichever address the header names.
    const first = await remaining('127.0.0.3', '198.51.100.1');
    expect(await remaining('127.0.0.3', '198.51.100.2')).toBe(first - 1);
    expect(await remaining('127.0.0.3')).toBe(first - 2);
  });

  it('through a trusted proxy, the right-most untrusted X-Forwarded-For entry is the client', async () => {
    // The client wrote 198.51.100.7; the proxy appended the address it saw, 203.0.113.5 (denied).
    const denied = await call(`${stack.gateway.url}/v1/openapi.json`, {
      localAddress: PROXY,
      headers: { 'x-forwarded-for': '198.51.100.7, 203.0.113.5' },
    });
    expect(denied.status).toBe(403);
    expect(denied.json).toEqual({ code: 'ip_not_allowed', message: expect.any(String), status: 403 });
    // The other way round: a denied address the client wrote left of its own is ignored.
    const admitted = await call(`${stack.gateway.url}/v1/openapi.json`, {
      localAddress: PROXY,
      headers: { 'x-forwarded-for': '203.0.113.5, 198.51.100.8, 10.1.2.3' },
    });
    expect(admitted.status).toBe(200);
    // Each client behind the proxy has its own failed-authentication count, apart from the proxy's.
    const a = await remaining(PROXY, '198.51.100.20');
    const b = await remaining(PROXY, '198.51.100.21');
    expect(a).toBe(b);
    expect(await remaining(PROXY, '198.51.100.20')).toBe(a - 1);
    expect(await remaining(PROXY, '1.2.3.4, 198.51.100.21, 10.9.9.9')).toBe(b - 1);
  });
});
