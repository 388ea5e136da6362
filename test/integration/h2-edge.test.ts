import { execFile } from 'node:child_process';
import type { ClientHttp2Session } from 'node:http2';
import type { Socket } from 'node:net';
import { promisify } from 'node:util';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { EdgeStack } from '../helpers/edge-stack.js';
import { curlVersionAndStatus, h2Request, h2Session } from '../helpers/h2-client.js';
import { FLAG, FRAME, getRequest, H2_ERROR, headerBlock, RawH2 } from '../helpers/raw-h2.js';
import { TestCerts } from '../helpers/tls-certs.js';

// HTTP/2 on the TLS listener (issue 23, item 2): the same edge as HTTP/1.1 — policy chain, Error
// bodies, canonical paths, gateway-owned headers — proxied to an HTTP/1.1 upstream (a recording
// one), plus the rules of HTTP/2 itself, each pinned as it happens on the wire.

const run = promisify(execFile);
let certs: TestCerts;
let stack: EdgeStack;
let session: ClientHttp2Session;

beforeAll(async () => {
  certs = new TestCerts();
  const pair = certs.make('gateway');
  stack = await EdgeStack.start({ env: { GATEWAY_TLS_CERT: pair.cert, GATEWAY_TLS_KEY: pair.key } });
  session = await h2Session(stack.gateway.url);
});
afterAll(async () => {
  session?.close();
  await stack?.stop();
  certs?.remove();
});
beforeEach(() => stack.upstream.reset());

const auth = () => ({ authorization: `Bearer ${stack.key.key}` });
const get = (path: string, headers: Record<string, string> = {}) => h2Request(session, { ':path': path, ...auth(), ...headers });
const seen = (index: number, name: string) => stack.upstream.header(stack.upstream.requests[index]!, name);

describe('an HTTP/2 request reaches the HTTP/1.1 upstream as the same request would over HTTP/1.1', () => {
  it('no pseudo-header becomes a field; Host is the :authority; X-Forwarded-Proto is https', async () => {
    const response = await get('/v1/categories');
    expect(response.status).toBe(200);
    const request = stack.upstream.requests[0]!;
    expect(`${request.method} ${request.target}`).toBe('GET /v1/categories');
    expect(request.headers.filter(([name]) => name.startsWith(':'))).toEqual([]);
    expect(seen(0, 'host')).toEqual([new URL(stack.gateway.url).host]);
    expect(seen(0, 'x-forwarded-proto')).toEqual(['https']);
    expect(seen(0, 'x-forwarded-host')).toEqual([new URL(stack.gateway.url).host]);
    expect(seen(0, 'x-tollgate-consumer-id')).toEqual([stack.key.id]);
    expect(seen(0, 'authorization')).toEqual([]);
    expect(response.headers['x-request-id']).toBe(seen(0, 'x-request-id')[0]);
    expect(response.headers['x-ratelimit-limit']).toBeDefined();
  });

  it('the path is canonicalised before any policy: the deprecated route gets its headers, the upstream one path', async () => {
    const response = await get('/v1/%70ets/./x/../42');
    expect(response.status).toBe(200);
    expect(response.headers.deprecation).toMatch(/^@\d+$/);
    expect(stack.upstream.requests.map((r) => r.target)).toEqual(['/v1/pets/42']);
  });

  it('a path that cannot be normalised safely is a 400 Error body, and the upstream sees nothing', async () => {
    const response = await get('/v1/pets/%2F..%2Fadmin');
    expect(response.status).toBe(400);
    expect(JSON.parse(response.body)).toMatchObject({ code: 'bad_request', status: 400 });
    expect(stack.upstream.requests).toEqual([]);
  });

  it('no key: 401 with WWW-Authenticate and the per-address limit headers, as on HTTP/1.1', async () => {
    const response = await h2Request(session, { ':path': '/v1/categories' });
    expect(response.status).toBe(401);
    expect(response.headers['www-authenticate']).toMatch(/^Bearer/);
    expect(response.headers['x-ratelimit-limit']).toBeDefined();
    expect(JSON.parse(response.body)).toMatchObject({ code: 'missing_api_key', status: 401 });
  });

  it('a body without Content-Length (HTTP/2 frames it) goes framed: chunked or its exact length, never unframed', async () => {
    const response = await h2Request(session, { ':method': 'POST', ':path': '/v1/categories', ...auth(), 'content-type': 'text/plain' }, [
      'part one, ',
      'part two',
    ]);
    expect(response.status).toBe(200);
    const request = stack.upstream.requests[0]!;
    expect(request.body.toString()).toBe('part one, part two');
    const framing = [...seen(0, 'content-length'), ...seen(0, 'transfer-encoding')];
    expect(framing).toHaveLength(1);
    expect(framing[0]).toMatch(/^(18|chunked)$/);
    expect(stack.upstream.garbage).toEqual([]);
  });

  it('a declared Content-Length goes as that length', async () => {
    const response = await h2Request(session, { ':method': 'PUT', ':path': '/v1/categories/1', ...auth(), 'content-length': '5' }, [
      'hello',
    ]);
    expect(response.status).toBe(200);
    expect(seen(0, 'content-length')).toEqual(['5']);
    expect(seen(0, 'transfer-encoding')).toEqual([]);
    expect(stack.upstream.requests[0]!.body.toString()).toBe('hello');
  });

  it('TE: trailers is allowed and, hop-by-hop, not forwarded', async () => {
    const response = await get('/v1/categories', { te: 'trailers' });
    expect(response.status).toBe(200);
    expect(seen(0, 'te')).toEqual([]);
  });

  it('Expect: 100-continue gets 100 only after the chain passed (a refused request gets its 401 at once)', async () => {
    const stream = session.request({ ':method': 'POST', ':path': '/v1/categories', expect: '100-continue', 'content-length': '2' });
    const status = await new Promise<number>((resolve) => {
      stream.on('continue', () => resolve(100));
      stream.on('response', (h) => resolve(Number(h[':status'])));
    });
    stream.close();
    expect(status).toBe(401);
    const admitted = session.request({
      ':method': 'POST',
      ':path': '/v1/categories',
      ...auth(),
      expect: '100-continue',
      'content-length': '2',
    });
    const first = await new Promise<string>((resolve) => {
      admitted.on('continue', () => resolve('continue'));
      admitted.on('response', (h) => resolve(String(h[':status'])));
    });
    expect(first).toBe('continue');
    admitted.end('{}');
    await new Promise((resolve) => admitted.on('response', resolve));
    admitted.close();
    expect(stack.upstream.requests).toHaveLength(1);
    expect(seen(0, 'expect')).toEqual([]);
  });
});

describe('the rules of HTTP/2 (RFC 9113 §8.2.2, §8.3.1)', () => {
  // Node's client makes a Host field the :authority; sent raw, both go.
  it('Host and :authority naming different hosts: 400, nothing upstream', async () => {
    const raw = await RawH2.connect(stack.port);
    raw.headers(
      1,
      getRequest('/v1/categories', [
        ['authorization', `Bearer ${stack.key.key}`],
        ['host', 'other.test'],
      ]),
    );
    const body = await raw.waitFor((f) => f.type === FRAME.DATA && f.streamId === 1 && f.payload.length > 0);
    raw.close();
    expect(JSON.parse(body.payload.toString())).toMatchObject({ code: 'bad_request', status: 400 });
    expect(body.payload.toString()).toMatch(/:authority and Host/);
    expect(stack.upstream.requests).toEqual([]);
  });

  it('Host equal to :authority (any case) passes', async () => {
    const response = await get('/v1/categories', { host: new URL(stack.gateway.url).host.toUpperCase() });
    expect(response.status).toBe(200);
  });

  // Node's client refuses to send these; nghttp2 on the server resets the stream before Node sees
  // it (h2-request.ts refuses them too, should that ever change): pinned here, raw.
  for (const [name, value] of [
    ['connection', 'close'],
    ['keep-alive', 'timeout=5'],
    ['proxy-connection', 'keep-alive'],
    ['transfer-encoding', 'chunked'],
    ['upgrade', 'websocket'],
    ['te', 'gzip'],
  ] as const) {
    it(`${name}: ${value} resets the stream (PROTOCOL_ERROR); the connection and other streams go on`, async () => {
      const raw = await RawH2.connect(stack.port);
      raw.headers(
        1,
        getRequest('/v1/categories', [
          ['authorization', `Bearer ${stack.key.key}`],
          [name, value],
        ]),
      );
      const reset = await raw.waitFor((f) => f.type === FRAME.RST_STREAM && f.streamId === 1);
      expect(reset.payload.readUInt32BE(0)).toBe(H2_ERROR.PROTOCOL_ERROR);
      raw.headers(3, getRequest('/v1/categories', [['authorization', `Bearer ${stack.key.key}`]]));
      const answer = await raw.waitFor((f) => f.type === FRAME.HEADERS && f.streamId === 3);
      expect(answer.flags & FLAG.END_HEADERS).toBeTruthy();
      raw.close();
      expect(stack.upstream.requests.map((r) => r.target)).toEqual(['/v1/categories']);
    });
  }

  it('more than 100 header fields: 431, as on HTTP/1.1', async () => {
    const many = Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`x-field-${i}`, 'v']));
    const response = await get('/v1/categories', many);
    expect(response.status).toBe(431);
    expect(stack.upstream.requests).toEqual([]);
  });

  // Advertised in SETTINGS_MAX_HEADER_LIST_SIZE, which Node's client honours; Node's server does
  // not enforce it (measured: 40 KiB reached the handler), so h2-request.ts does. Sent raw.
  it('a header list over 16 KiB: 431, as a head over 16 KiB on HTTP/1.1', async () => {
    expect(session.remoteSettings.maxHeaderListSize).toBe(16 * 1024);
    const raw = await RawH2.connect(stack.port);
    const block = headerBlock(
      getRequest('/v1/categories', [
        ['authorization', `Bearer ${stack.key.key}`],
        ['x-big', 'a'.repeat(20 * 1024)],
      ]),
    );
    raw.send(FRAME.HEADERS, FLAG.END_STREAM, 1, block.subarray(0, 16_000));
    raw.send(FRAME.CONTINUATION, FLAG.END_HEADERS, 1, block.subarray(16_000));
    const body = await raw.waitFor((f) => f.type === FRAME.DATA && f.streamId === 1 && f.payload.length > 0);
    raw.close();
    expect(JSON.parse(body.payload.toString())).toMatchObject({ code: 'request_header_fields_too_large', status: 431 });
    expect(stack.upstream.requests).toEqual([]);
  });

  it('the server advertises 100 concurrent streams and no push', () => {
    expect(session.remoteSettings.maxConcurrentStreams).toBe(100);
    expect(session.remoteSettings.enablePush).toBe(false);
  });

  it('a stream the client resets frees its upstream request (the upstream connection is closed)', async () => {
    const upstreamSockets: Socket[] = [];
    let receivedAt = 0;
    stack.upstream.respond = (_request, socket) => {
      receivedAt = performance.now();
      upstreamSockets.push(socket);
    };
    const stream = session.request({ ':path': '/v1/slow', ...auth() });
    stream.on('error', () => undefined);
    const deadline = Date.now() + 30_000;
    while (upstreamSockets.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(upstreamSockets).toHaveLength(1);
    const closed = new Promise<number>((resolve) => upstreamSockets[0]!.once('close', () => resolve(performance.now() - receivedAt)));
    stream.close(H2_ERROR.CANCEL);
    // At the reset, not when the upstream timeout (1.5 s here, running since the upstream got the
    // request; timers never fire early) would have ended it anyway.
    expect(await closed).toBeLessThan(1500);
    const line = await stack.gateway.process.waitForLog('request', 60_000, (l) => l.path === '/v1/slow');
    expect(line).toMatchObject({ http: '2', aborted: true });
    // The session is unharmed.
    stack.upstream.reset();
    expect((await get('/v1/categories')).status).toBe(200);
  });
});

describe('real clients', () => {
  it('curl --http2 and nghttp are served over h2; h2load runs 200 requests on 4 connections, all 2xx', async () => {
    const curl = await curlVersionAndStatus(['-k', '--http2'], `${stack.gateway.url}/v1/categories`, stack.key.key);
    expect(curl).toBe('2 200');
    const { stdout: nghttp } = await run('nghttp', [
      '-v',
      '-H',
      `authorization: Bearer ${stack.key.key}`,
      `${stack.gateway.url}/v1/categories`,
    ]);
    expect(nghttp).toMatch(/:status: 200/);
    const { stdout: h2load } = await run('h2load', [
      '-n',
      '200',
      '-c',
      '4',
      '-m',
      '10',
      '-H',
      `authorization: Bearer ${stack.key.key}`,
      `${stack.gateway.url}/v1/categories`,
    ]);
    expect(h2load).toMatch(/Application protocol: h2/);
    expect(h2load).toMatch(/status codes: 200 2xx, 0 3xx, 0 4xx, 0 5xx/);
  });
});
