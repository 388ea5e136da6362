import type { ClientHttp2Session } from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EdgeStack } from '../helpers/edge-stack.js';
import { h2Request, h2Session } from '../helpers/h2-client.js';
import { exchange } from '../helpers/raw-client.js';
import { TestCerts } from '../helpers/tls-certs.js';

// Fault containment as a property: a throw injected at each stage of the request path (the
// gateway's test-only seam, src/gateway/test-faults.ts, armed by TOLLGATE_TEST_FAULTS=1 and
// steered by the x-test-fault header) gets exactly one answer, a 500 internal_error, and on
// HTTP/1.1 a closed connection; never a hang, never two answers, and the process keeps serving.
// HTTP/1.1 on the plain listener, HTTP/1.1 and HTTP/2 on the TLS listener, WebSocket handshakes.

const FAULT = 'x-test-fault';
// A bound against hanging, not a timing assertion: a contained fault closes at once, the hang
// this guards against lasted over 70 s.
const BOUND_MS = 20_000;

let plain: EdgeStack;
let tls: EdgeStack;
let certs: TestCerts;
let policies = 0;

beforeAll(async () => {
  certs = new TestCerts();
  const served = certs.make('served', 'localhost');
  [plain, tls] = await Promise.all([
    EdgeStack.start({ env: { TOLLGATE_TEST_FAULTS: '1' } }),
    EdgeStack.start({ env: { TOLLGATE_TEST_FAULTS: '1', GATEWAY_TLS_CERT: served.cert, GATEWAY_TLS_KEY: served.key } }),
  ]);
  policies = Number(plain.gateway.process.logs().find((line) => line.msg === 'test faults armed on the policy chain')?.policies);
}, 120_000);
afterAll(async () => {
  await plain?.stop();
  await tls?.stop();
  certs?.remove();
});

/** Every stage before the hand-over to the proxy, as the running gateway has them. */
function chainStages(): string[] {
  const stages = ['edge'];
  for (let i = 0; i < policies; i++) stages.push(`policy:${i}`, `policy:${i}:async`);
  return stages;
}

const proxyStages = () => [...chainStages(), 'forward', 'relay-head', 'relay-body'];

function expectOneInternalError(result: Awaited<ReturnType<EdgeStack['send']>>, stage: string): void {
  expect(result.closed, `${stage}: the connection must close, not hang`).toBe(true);
  expect(
    result.responses.map((r) => r.status),
    `${stage}: ${result.raw.slice(0, 300)}`,
  ).toEqual([500]);
  expect(JSON.parse(result.responses[0]!.body)).toMatchObject({ code: 'internal_error', status: 500 });
}

describe('a fault at any stage: one 500, then the connection closes (HTTP/1.1, plain listener)', () => {
  it('the gateway reports its chain, so every policy is covered', () => {
    expect(policies).toBeGreaterThanOrEqual(8);
  });

  it('each stage, on a keep-alive connection with a second request pipelined behind it', async () => {
    for (const stage of proxyStages()) {
      const request = `GET /v1/categories HTTP/1.1\r\n${plain.auth}${FAULT}: ${stage}\r\n\r\n`;
      const sentinel = `GET /v1/categories HTTP/1.1\r\n${plain.auth}\r\n`;
      const result = await plain.send([request + sentinel], { waitForClose: true, boundMs: BOUND_MS });
      expectOneInternalError(result, stage);
    }
  });

  it('a request with a body (POST) at each stage', async () => {
    const body = JSON.stringify({ name: 'Dog' });
    for (const stage of proxyStages()) {
      const result = await plain.send(
        [
          `POST /v1/categories HTTP/1.1\r\n${plain.auth}${FAULT}: ${stage}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
        ],
        { waitForClose: true, boundMs: BOUND_MS },
      );
      expectOneInternalError(result, stage);
    }
  });

  it('WebSocket handshakes at each stage before and after the hand-over to the tunnel', async () => {
    for (const stage of [...chainStages(), 'tunnel', 'relay-head']) {
      const result = await plain.send(
        [
          `GET /v1/socket HTTP/1.1\r\n${plain.auth}${FAULT}: ${stage}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
            'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
        ],
        { waitForClose: true, boundMs: BOUND_MS },
      );
      expectOneInternalError(result, stage);
    }
  });

  it('a throw in the access log after the answer is contained: the process keeps serving', async () => {
    const result = await plain.send([`GET /v1/categories HTTP/1.1\r\n${plain.auth}${FAULT}: log\r\n\r\n`], { boundMs: BOUND_MS });
    expect(result.responses.map((r) => r.status)).toEqual([200]);
    await plain.gateway.process.waitForLog('uncaught error (process kept running)');
    await plain.sentinel();
  });

  it('the target is not blamed for our faults: it stays in rotation and answers the next request', async () => {
    const before = plain.upstream.requests.length;
    await plain.sentinel();
    expect(plain.upstream.requests.length).toBe(before + 1);
    expect(await plain.metrics()).not.toMatch(/tollgate_upstream_ejections_total\{[^}]*\} [1-9]/);
  });

  it('each fault is one error-level log line naming the injected fault', () => {
    const errors = plain.gateway.process.logs().filter((line) => line.level === 50);
    expect(errors.length).toBeGreaterThan(0);
    for (const line of errors) expect(JSON.stringify(line.err)).toMatch(/fault injected at/);
  });
});

describe('the admin listener', () => {
  const adminSend = (text: string) =>
    exchange(Number(new URL(plain.gateway.adminUrl).port), [text], { waitForClose: true, boundMs: BOUND_MS });

  it('a fault in its request handler: one 500, then the connection closes', async () => {
    for (const path of ['/healthz', '/readyz', '/metrics', '/admin/v1/keys', '/admin/console']) {
      const result = await adminSend(
        `GET ${path} HTTP/1.1\r\nHost: admin\r\n${FAULT}: admin\r\n\r\nGET /healthz HTTP/1.1\r\nHost: admin\r\n\r\n`,
      );
      expectOneInternalError(result, `admin ${path}`);
    }
    expect((await adminSend('GET /healthz HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n')).responses.map((r) => r.status)).toEqual([
      200,
    ]);
  });

  it('a request line of another HTTP version is 505 and a close, as on the public listener', async () => {
    for (const version of ['HTTP/2.0', 'HTTP/0.9']) {
      const result = await adminSend(`GET /healthz ${version}\r\nHost: admin\r\n\r\n`);
      expect(result.closed, version).toBe(true);
      expect(
        result.responses.map((r) => r.status),
        version,
      ).toEqual([505]);
    }
  });

  it('malformed HTTP gets an Error body, not an empty 400', async () => {
    const result = await adminSend('GET /healthz HTTP/1.1\r\nHost: admin\r\nbad name: x\r\n\r\n');
    expect(result.responses.map((r) => r.status)).toEqual([400]);
    expect(JSON.parse(result.responses[0]!.body)).toMatchObject({ code: 'bad_request', status: 400 });
  });
});

describe('a fault at any stage on the TLS listener', () => {
  it('HTTP/1.1 over TLS: one 500, then the connection closes', async () => {
    const { connect } = await import('node:tls');
    for (const stage of proxyStages()) {
      const raw = await new Promise<{ text: string; closed: boolean }>((resolve) => {
        let text = '';
        const socket = connect({ host: '127.0.0.1', port: tls.port, rejectUnauthorized: false, ALPNProtocols: ['http/1.1'] }, () =>
          socket.write(`GET /v1/categories HTTP/1.1\r\n${tls.auth}${FAULT}: ${stage}\r\n\r\n`),
        );
        const timer = setTimeout(() => resolve({ text, closed: false }), BOUND_MS);
        socket.on('data', (chunk) => (text += chunk.toString('latin1')));
        socket.on('close', () => {
          clearTimeout(timer);
          resolve({ text, closed: true });
        });
        socket.on('error', () => undefined);
      });
      expect(raw.closed, `${stage}: the connection must close`).toBe(true);
      expect(raw.text.match(/^HTTP\/1\.1 \d{3}/gm), stage).toEqual(['HTTP/1.1 500']);
      expect(raw.text).toContain('"code":"internal_error"');
    }
  });

  it('HTTP/2: one 500 on the stream, and the session goes on serving other streams', async () => {
    const session: ClientHttp2Session = await h2Session(tls.gateway.url);
    try {
      for (const stage of proxyStages()) {
        const base = { ':method': 'GET', ':path': '/v1/categories', authorization: `Bearer ${tls.key.key}` };
        const faulty = await h2Request(session, { ...base, [FAULT]: stage });
        expect(faulty.status, stage).toBe(500);
        expect(JSON.parse(faulty.body)).toMatchObject({ code: 'internal_error' });
        expect((await h2Request(session, base)).status, `${stage}: the next stream`).toBe(200);
      }
    } finally {
      session.close();
    }
  });
});

describe('a fault while answering an upstream failure (inside undici onError)', () => {
  let dead: EdgeStack;
  beforeAll(async () => {
    // An upstream whose port refuses connections: every try fails, and the gateway's own answer
    // (a 502 written from undici's onError) is where the injected throw lands.
    dead = await EdgeStack.start({ env: { TOLLGATE_TEST_FAULTS: '1', UPSTREAM_URL: 'http://127.0.0.1:1' } });
  }, 120_000);
  afterAll(async () => {
    await dead?.stop();
  });

  it('the 502 without a fault, then with one: one 500 and a close, never a hang', async () => {
    const clean = await dead.send([`GET /v1/categories HTTP/1.1\r\n${dead.auth}\r\n`], { boundMs: BOUND_MS });
    expect(clean.responses.map((r) => r.status)).toEqual([502]);
    const faulty = await dead.send([`GET /v1/categories HTTP/1.1\r\n${dead.auth}${FAULT}: relay-head\r\n\r\n`], {
      waitForClose: true,
      boundMs: BOUND_MS,
    });
    expectOneInternalError(faulty, 'relay-head in onError');
    expect(dead.gateway.process.logs().some((l) => l.msg === 'uncaught error (process kept running)')).toBe(false);
  });

  it('the same for a WebSocket handshake whose upstream refuses the connection', async () => {
    const handshake =
      `GET /v1/socket HTTP/1.1\r\n${dead.auth}Connection: Upgrade\r\nUpgrade: websocket\r\n` +
      'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n';
    const clean = await dead.send([handshake + '\r\n'], { waitForClose: true, boundMs: BOUND_MS });
    expect(clean.responses.map((r) => r.status)).toEqual([502]);
    const faulty = await dead.send([`${handshake}${FAULT}: relay-head\r\n\r\n`], { waitForClose: true, boundMs: BOUND_MS });
    expectOneInternalError(faulty, 'relay-head in the handshake onError');
    expect(dead.gateway.process.logs().some((l) => l.msg === 'uncaught error (process kept running)')).toBe(false);
  });
});
