import type { ClientHttp2Session } from 'node:http2';
import { connect as netConnect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { EdgeStack } from '../helpers/edge-stack.js';
import { h2Request, h2Session } from '../helpers/h2-client.js';
import { exchange, type Exchange } from '../helpers/raw-client.js';
import { TestCerts } from '../helpers/tls-certs.js';

// Request methods the gateway does not take, found by edge-head-fuzz.test.ts, on every listener
// that reads them:
// - PRI (reserved for HTTP/2's connection preface) on an HTTP/1.1 connection: llhttp, having read
//   `PRI <target> HTTP/1.1\r\n\r\n`, waited for the rest of the preface, and the client for the
//   header timeout's 408 (10 s); now 400 at once, then the connection closed;
// - a `:method` HTTP/1.1 would not read (`~A`, `get`) on HTTP/2: it reached the upstream, which
//   could not frame it (here: no answer, a 504 at the upstream timeout); now 400, as on HTTP/1.1.

let certs: TestCerts;
let plain: EdgeStack;
let tls: EdgeStack;
let session: ClientHttp2Session;

beforeAll(async () => {
  certs = new TestCerts();
  const served = certs.make('served', 'localhost');
  [plain, tls] = await Promise.all([
    EdgeStack.start(),
    EdgeStack.start({ env: { GATEWAY_TLS_CERT: served.cert, GATEWAY_TLS_KEY: served.key } }),
  ]);
}, 120_000);
afterAll(async () => {
  session?.close();
  await plain?.stop();
  await tls?.stop();
  certs?.remove();
});
beforeEach(async () => {
  plain.upstream.reset();
  tls.upstream.reset();
  // A new session each test: the connection guard closes one that sends no request head in time.
  session?.close();
  session = await h2Session(tls.gateway.url);
});

const listeners = {
  plain: () => netConnect(plain.port, '127.0.0.1'),
  'TLS (HTTP/1.1)': () => tlsConnect({ host: '127.0.0.1', port: tls.port, rejectUnauthorized: false, ALPNProtocols: ['http/1.1'] }),
  admin: () => netConnect(Number(new URL(plain.gateway.adminUrl).port), '127.0.0.1'),
};

/** One 400 Error body, and the connection closed after it. */
function expectRefused(result: Exchange, shown: string): void {
  expect(
    result.responses.map((r) => r.status),
    `${shown}: ${JSON.stringify(result.raw.slice(0, 200))}`,
  ).toEqual([400]);
  const body = JSON.parse(result.responses[0]!.body) as Record<string, unknown>;
  expect(body).toMatchObject({ code: 'bad_request', status: 400 });
  expect(Object.keys(body).sort()).toEqual(['code', 'message', 'status']);
  expect(typeof body.message).toBe('string');
  expect(result.closed, `${shown}: closed`).toBe(true);
}

describe('PRI on an HTTP/1.1 connection: 400 at once, then closed (it used to wait for the 408 at the header timeout)', () => {
  const heads = [
    'PRI /v1/categories HTTP/1.1\r\n\r\n',
    'PRI * HTTP/1.1\r\n\r\n',
    'PRI * HTTP/2.0\r\n\r\n',
    // Empty lines before a request line are skipped by the parser (RFC 9112 §2.2), so here too.
    '\r\n\r\nPRI /v1 HTTP/1.0\r\n\r\n',
    // The whole HTTP/2 preface, and a SETTINGS frame after it: HTTP/2 without TLS (h2c) is not served.
    'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n',
    'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00',
    // With fields, llhttp refused it already; answered the same way.
    'PRI /v1/categories HTTP/1.1\r\nHost: gateway.test\r\n\r\n',
  ];
  for (const [name, open] of Object.entries(listeners)) {
    it(`the ${name} listener`, async () => {
      for (const head of heads) {
        // waitForClose: the answer and the close both arrive, or the bound ends the wait.
        expectRefused(await exchange(open, [Buffer.from(head, 'latin1')], { waitForClose: true }), `${name} ${JSON.stringify(head)}`);
      }
      // The method arriving a byte at a time is read the same way.
      expectRefused(await exchange(open, ['P', 'R', 'I', ' /v1 HTTP/1.1\r\n\r\n'], { waitForClose: true }), `${name} split`);
    });
  }

  it('no connection is left open; nothing reached an upstream; other methods starting with P pass; HTTP/2 over TLS is unchanged', async () => {
    // The public listeners' open connections (the admin one is not counted): none once the clients closed.
    const open = async (stack: EdgeStack) => Number(/^tollgate_client_connections (\d+)$/m.exec(await stack.metrics())?.[1]);
    await expect.poll(() => open(plain)).toBe(0);
    // The TLS stack's own HTTP/2 session of this test is still open.
    await expect.poll(() => open(tls)).toBe(1);
    expect(plain.upstream.connections.flat()).toEqual([]);
    expect(tls.upstream.connections.flat()).toEqual([]);
    const auth = `Host: gateway.test\r\nAuthorization: Bearer ${plain.key.key}\r\n`;
    for (const method of ['POST', 'PUT', 'PATCH', 'PROPFIND']) {
      const result = await plain.send([`${method} /v1/categories HTTP/1.1\r\n${auth}content-length: 0\r\n\r\n`]);
      expect(
        result.responses.map((r) => r.status),
        method,
      ).toEqual([200]);
    }
    expect(plain.targets()).toEqual(['POST /v1/categories', 'PUT /v1/categories', 'PATCH /v1/categories', 'PROPFIND /v1/categories']);
    const response = await h2Request(session, { ':path': '/v1/categories', authorization: `Bearer ${tls.key.key}` });
    expect(response.status).toBe(200);
  });
});

describe('a method HTTP/1.1 would not read is 400 on HTTP/2 too, and never reaches the upstream', () => {
  it('`~A` and `get` on HTTP/2: 400 Error body (the upstream used to get them, and leave the stream to its timeout)', async () => {
    for (const method of ['~A', 'get', 'G%T']) {
      const response = await h2Request(session, { ':method': method, ':path': '/v1/categories', authorization: `Bearer ${tls.key.key}` });
      expect(response.status, method).toBe(400);
      expect(JSON.parse(response.body)).toMatchObject({ code: 'bad_request', status: 400 });
    }
    expect(tls.upstream.connections.flat()).toEqual([]);
    // The session is still usable.
    expect((await h2Request(session, { ':path': '/v1/categories', authorization: `Bearer ${tls.key.key}` })).status).toBe(200);
  });

  it('methods HTTP/1.1 reads, known or not to the routes, still pass on HTTP/2', async () => {
    for (const method of ['PROPFIND', 'QUERY', 'PURGE']) {
      const response = await h2Request(session, { ':method': method, ':path': '/v1/categories', authorization: `Bearer ${tls.key.key}` });
      expect(response.status, method).toBe(200);
    }
    expect(tls.targets()).toEqual(['PROPFIND /v1/categories', 'QUERY /v1/categories', 'PURGE /v1/categories']);
  });

  it('the same methods on HTTP/1.1 (plain and TLS): 400 Error body and a close, as before', async () => {
    for (const [name, open, stack] of [
      ['plain', listeners.plain, plain],
      ['TLS', listeners['TLS (HTTP/1.1)'], tls],
    ] as const) {
      const auth = `Host: gateway.test\r\nAuthorization: Bearer ${stack.key.key}\r\n`;
      for (const method of ['~A', 'get']) {
        expectRefused(
          await exchange(open, [`${method} /v1/categories HTTP/1.1\r\n${auth}\r\n`], { waitForClose: true }),
          `${name} ${method}`,
        );
      }
    }
    expect(plain.upstream.connections.flat()).toEqual([]);
    expect(tls.upstream.connections.flat()).toEqual([]);
  });
});
