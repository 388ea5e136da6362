import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { EdgeStack } from '../helpers/edge-stack.js';
import { headerOf } from '../helpers/raw-client.js';
import type { RecordedRequest } from '../helpers/recording-upstream.js';

// Headers the gateway owns: what the upstream sees of X-Forwarded-*, the request id and identity
// can never be forged or removed by a client, and connection management stays per hop.

let stack: EdgeStack;
beforeAll(async () => {
  stack = await EdgeStack.start();
});
afterAll(async () => stack?.stop());
beforeEach(() => stack.upstream.reset());

const seen = (request: RecordedRequest | undefined, name: string) => stack.upstream.header(request!, name);

describe("docs/upstream.md, 'What the upstream sees'", () => {
  it('is exactly what a recording upstream receives for GET /v1/./pets/42', async () => {
    await stack.send([
      `GET /v1/./pets/42 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\nAuthorization: Bearer ${stack.key.key}\r\n\r\n`,
    ]);
    const request = stack.upstream.requests[0]!;
    expect(`${request.method} ${request.target}`).toBe('GET /v1/pets/42');
    expect(request.headers.map(([name]) => name)).toEqual([
      'host',
      'connection',
      'user-agent',
      'accept',
      'x-request-id',
      'x-tollgate-consumer-id',
      'x-tollgate-plan',
      'x-tollgate-assertion',
      'x-forwarded-for',
      'x-forwarded-host',
      'x-forwarded-proto',
      'x-forwarded-port',
    ]);
    expect(Object.fromEntries(request.headers)).toMatchObject({
      host: '127.0.0.1:8080',
      'x-tollgate-plan': 'enterprise',
      'x-forwarded-for': '127.0.0.1',
      'x-forwarded-host': '127.0.0.1:8080',
      'x-forwarded-proto': 'http',
      'x-forwarded-port': String(stack.port),
      connection: 'keep-alive',
    });
    expect(request.body.length).toBe(0);
  });
});

describe('X-Forwarded-* with trustProxyHops 0', () => {
  it('client-sent X-Forwarded-For/-Host/-Proto/-Port and Forwarded are replaced by what the gateway saw', async () => {
    await stack.send([
      `GET /v1/categories HTTP/1.1\r\nHost: gateway.test:9999\r\nAuthorization: Bearer ${stack.key.key}\r\n` +
        'X-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Host: evil.test\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Port: 1\r\nForwarded: for=6.6.6.6\r\n\r\n',
    ]);
    const request = stack.upstream.requests[0];
    expect(seen(request, 'x-forwarded-for')).toEqual(['127.0.0.1']);
    expect(seen(request, 'x-forwarded-host')).toEqual(['gateway.test:9999']);
    expect(seen(request, 'x-forwarded-proto')).toEqual(['http']);
    // The listening socket's port, not the one the client wrote in Host.
    expect(seen(request, 'x-forwarded-port')).toEqual([String(stack.port)]);
    expect(seen(request, 'forwarded')).toEqual([]);
  });
});

describe('Connection cannot strip what the gateway adds', () => {
  it('Connection listing the request id, identity, X-Forwarded-For and Host leaves them all in place', async () => {
    const result = await stack.send([
      `GET /v1/categories HTTP/1.1\r\n${stack.auth}X-Request-Id: client-chosen-id-1\r\n` +
        'Connection: x-request-id, x-tollgate-consumer-id, x-tollgate-plan, x-tollgate-assertion, x-forwarded-for, host\r\n\r\n',
    ]);
    const request = stack.upstream.requests[0];
    expect(seen(request, 'x-request-id')).toEqual([headerOf(result.responses[0], 'x-request-id')]);
    expect(seen(request, 'x-tollgate-consumer-id')).toEqual([stack.key.id]);
    expect(seen(request, 'x-tollgate-plan')).toEqual(['enterprise']);
    expect(seen(request, 'x-tollgate-assertion')).toHaveLength(1);
    expect(seen(request, 'x-forwarded-for')).toEqual(['127.0.0.1']);
    expect(seen(request, 'host')).toEqual(['gateway.test']);
    // Our own hop's Connection (the pooled keep-alive socket), not the client's list.
    expect(seen(request, 'connection')).toEqual(['keep-alive']);
  });

  it('Connection can still drop an ordinary end-to-end header the client sent (RFC 9110 §7.6.1)', async () => {
    await stack.send([`GET /v1/categories HTTP/1.1\r\n${stack.auth}X-Private: 1\r\nConnection: x-private\r\n\r\n`]);
    expect(seen(stack.upstream.requests[0], 'x-private')).toEqual([]);
  });
});

describe('connection management per hop', () => {
  it("a client's Connection: close closes the client connection after a proxied response", async () => {
    const result = await stack.send([`GET /v1/categories HTTP/1.1\r\n${stack.auth}Connection: close\r\n\r\n`], { waitForClose: true });
    expect(result.responses).toHaveLength(1);
    expect(result.responses[0]!.status).toBe(200);
    expect(headerOf(result.responses[0], 'connection')).toBe('close');
    expect(result.closed).toBe(true);
  });

  it("the upstream's Connection and Keep-Alive response headers are not copied to the client", async () => {
    stack.upstream.respond = (_request, socket) =>
      socket.write(
        'HTTP/1.1 200 OK\r\nConnection: keep-alive, x-upstream-hop\r\nKeep-Alive: timeout=999\r\nX-Upstream-Hop: 1\r\nContent-Length: 2\r\n\r\n{}',
      );
    const result = await stack.send([`GET /v1/categories HTTP/1.1\r\n${stack.auth}\r\n`]);
    const response = result.responses[0];
    expect(response?.status).toBe(200);
    expect(headerOf(response, 'keep-alive')).not.toBe('timeout=999');
    expect(headerOf(response, 'x-upstream-hop')).toBeUndefined();
  });
});

describe('Expect: 100-continue', () => {
  it('is not answered with 100 before the key is checked', async () => {
    const result = await stack.send([
      `POST /v1/categories HTTP/1.1\r\nHost: gateway.test\r\nAuthorization: Bearer tg_nope\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n`,
    ]);
    expect(result.responses.map((r) => r.status)).toEqual([401]);
    expect(stack.upstream.requests).toEqual([]);
  });

  it('is answered with 100 once the chain passed, and the body reaches the upstream without the expectation', async () => {
    const result = await stack.send([
      `POST /v1/categories HTTP/1.1\r\n${stack.auth}Expect: 100-continue\r\nContent-Length: 2\r\n\r\n`,
      '{}',
    ]);
    expect(result.responses.map((r) => r.status)).toEqual([100, 200]);
    expect(stack.upstream.requests[0]!.body.toString()).toBe('{}');
    expect(seen(stack.upstream.requests[0], 'expect')).toEqual([]);
  });

  it('keeps the upstream timeout in force: a silent upstream gives 504', async () => {
    stack.upstream.respond = () => {};
    const result = await stack.send([
      `POST /v1/categories HTTP/1.1\r\n${stack.auth}Expect: 100-continue\r\nContent-Length: 2\r\n\r\n`,
      '{}',
    ]);
    expect(result.responses.map((r) => r.status)).toEqual([100, 504]);
    expect(JSON.parse(result.responses[1]!.body).code).toBe('gateway_timeout');
  });
});

describe('route headers win over the upstream', () => {
  it("the gateway's Deprecation and Sunset replace the upstream's; Link values are merged", async () => {
    stack.upstream.respond = (_request, socket) =>
      socket.write(
        'HTTP/1.1 200 OK\r\nDeprecation: @1\r\nSunset: Thu, 01 Jan 2099 00:00:00 GMT\r\nLink: <https://upstream.test/help>; rel="help"\r\nContent-Length: 2\r\n\r\n{}',
      );
    const result = await stack.send([`GET /v1/pets/42 HTTP/1.1\r\n${stack.auth}\r\n`]);
    const response = result.responses[0];
    expect(headerOf(response, 'deprecation')).toBe(`@${Date.parse('2026-01-01T00:00:00Z') / 1000}`);
    expect(headerOf(response, 'sunset')).toBe('Wed, 30 Jun 2027 00:00:00 GMT');
    const link = headerOf(response, 'link')!;
    expect(link).toContain('rel="deprecation"');
    expect(link).toContain('rel="sunset"');
    expect(link).toContain('<https://upstream.test/help>; rel="help"');
  });
});

describe('X-Forwarded-* with trustProxyHops 1 (behind one load balancer)', () => {
  let behindLb: EdgeStack;
  beforeAll(async () => {
    behindLb = await EdgeStack.start({ env: { TRUST_PROXY_HOPS: '1' } });
  });
  afterAll(async () => behindLb?.stop());

  it('keeps only the entry the trusted hop appended, appends the peer, and takes Proto/Host/Port from that hop', async () => {
    await behindLb.send([
      `GET /v1/categories HTTP/1.1\r\n${behindLb.auth}X-Forwarded-For: 6.6.6.6, 203.0.113.9\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: api.example.test\r\nX-Forwarded-Port: 443\r\n\r\n`,
    ]);
    const request = behindLb.upstream.requests[0]!;
    expect(behindLb.upstream.header(request, 'x-forwarded-for')).toEqual(['203.0.113.9, 127.0.0.1']);
    expect(behindLb.upstream.header(request, 'x-forwarded-proto')).toEqual(['https']);
    expect(behindLb.upstream.header(request, 'x-forwarded-host')).toEqual(['api.example.test']);
    expect(behindLb.upstream.header(request, 'x-forwarded-port')).toEqual(['443']);
  });
});
