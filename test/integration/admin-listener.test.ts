import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, ADMIN_TOKENS, OPS_TOKEN } from '../helpers/admin-client.js';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { runCli, TollgateProcess } from '../helpers/processes.js';
import { bearer, startGateway, type GatewayHandle } from '../helpers/stack.js';

// The admin listener with and without admin tokens, on the embedded store (no Redis): absent
// (404) without tokens while health and metrics keep working; a bad token list stops the start.

let upstream: EchoUpstream;
const started: GatewayHandle[] = [];

beforeAll(async () => {
  upstream = await new EchoUpstream().start();
});

afterAll(async () => {
  await Promise.all(started.map((g) => g.process.stop()));
  await upstream?.stop();
});

async function gateway(env: Record<string, string>): Promise<GatewayHandle> {
  const handle = await startGateway({ UPSTREAM_URL: upstream.url, ...env });
  started.push(handle);
  return handle;
}

describe('without TOLLGATE_ADMIN_TOKENS', () => {
  it('answers 404 on every admin path, even with a token, while /healthz, /readyz and /metrics work', async () => {
    const g = await gateway({});
    for (const [method, path] of [
      ['GET', '/keys'],
      ['POST', '/keys'],
      ['GET', '/openapi.json'],
      ['GET', '/audit'],
    ] as const) {
      const answer = await admin(g.adminUrl, method, path, { token: OPS_TOKEN, ...(method === 'POST' ? { body: { plan: 'free' } } : {}) });
      expect(answer.status, `${method} ${path}`).toBe(404);
      expect(answer.body).toMatchObject({ code: 'not_found', status: 404 });
    }
    expect((await fetch(`${g.adminUrl}/healthz`)).status).toBe(200);
    expect((await fetch(`${g.adminUrl}/readyz`)).status).toBe(200);
    const metrics = await fetch(`${g.adminUrl}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain('tollgate_requests_total');
  });
});

describe('with TOLLGATE_ADMIN_TOKENS on the embedded store', () => {
  it('issues a key the gateway accepts and audits it in memory', async () => {
    const g = await gateway({ TOLLGATE_ADMIN_TOKENS: ADMIN_TOKENS });
    const created = await admin(g.adminUrl, 'POST', '/keys', { body: { plan: 'pro', name: 'embedded' } });
    expect(created.status).toBe(201);
    expect((await fetch(`${g.url}/v1/categories`, { headers: bearer(created.body.key) })).status).toBe(200);
    const audit = await admin(g.adminUrl, 'GET', '/audit');
    expect(audit.body.entries).toMatchObject([{ actor: 'ops', action: 'key.create', keyId: created.body.id }]);
    expect((await fetch(`${g.adminUrl}/healthz`)).status).toBe(200);
  });
});

/**
 * Sends a request head with `Expect: 100-continue` and returns every status line read until the
 * connection has been quiet for a moment after a final answer; `body` is sent once a 100 came.
 */
function expectContinue(adminUrl: string, head: string, body = ''): Promise<string[]> {
  const { port } = new URL(adminUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1');
    let data = '';
    let bodySent = false;
    const statusLines = () => data.split('\r\n').filter((line) => /^HTTP\/1\.1 \d{3} /.test(line));
    socket.on('data', (chunk: Buffer) => {
      data += chunk.toString('latin1');
      if (!bodySent && statusLines()[0] === 'HTTP/1.1 100 Continue') {
        bodySent = true;
        socket.write(body);
      }
      if (statusLines().some((line) => !line.startsWith('HTTP/1.1 100 '))) socket.end();
    });
    socket.on('close', () => resolve(statusLines()));
    socket.on('error', reject);
    socket.write(head);
  });
}

describe('Expect: 100-continue on the admin listener', () => {
  it('invites a body only where a route reads one: probes, 404s and refused tokens answer finally at once', async () => {
    const g = await gateway({ TOLLGATE_ADMIN_TOKENS: ADMIN_TOKENS });
    const expect100 = 'Expect: 100-continue\r\nConnection: close\r\n';
    // Node's default, without a checkContinue listener, sent 100 before each of these.
    expect(await expectContinue(g.adminUrl, `GET /readyz HTTP/1.1\r\nHost: a\r\n${expect100}\r\n`)).toEqual(['HTTP/1.1 200 OK']);
    expect(await expectContinue(g.adminUrl, `GET /${'a'.repeat(1200)} HTTP/1.1\r\nHost: a\r\n${expect100}\r\n`)).toEqual([
      'HTTP/1.1 404 Not Found',
    ]);
    const body = JSON.stringify({ plan: 'pro', name: 'continued' });
    const post = (token: string) =>
      `POST /admin/v1/keys HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n${expect100}\r\n`;
    expect(await expectContinue(g.adminUrl, post('not-a-token'), body)).toEqual(['HTTP/1.1 401 Unauthorized']);
    // A route that reads the body asks for it, then answers.
    expect(await expectContinue(g.adminUrl, post(OPS_TOKEN), body)).toEqual(['HTTP/1.1 100 Continue', 'HTTP/1.1 201 Created']);
  });

  it('does not invite a body it would refuse: a declared length over the limit, or not JSON, is answered at once', async () => {
    const g = await gateway({ TOLLGATE_ADMIN_TOKENS: ADMIN_TOKENS });
    const head = (type: string, length: number) =>
      `POST /admin/v1/keys HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${OPS_TOKEN}\r\nContent-Type: ${type}\r\nContent-Length: ${length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`;
    // A client that says it will send 10 MiB: refused before a byte of it is asked for.
    expect(await expectContinue(g.adminUrl, head('application/json', 10 * 1024 * 1024))).toEqual(['HTTP/1.1 413 Payload Too Large']);
    expect(await expectContinue(g.adminUrl, head('text/plain', 20), 'x'.repeat(20))).toEqual(['HTTP/1.1 415 Unsupported Media Type']);
  });
});

/**
 * Writes `bytes` at once on one keep-alive connection and returns every status line read (the
 * answers may come glued to each other's bodies) once `finals` final answers came, or the
 * connection closed first.
 */
function pipelined(adminUrl: string, bytes: string, finals: number): Promise<string[]> {
  const { port } = new URL(adminUrl);
  return new Promise((resolve) => {
    const socket = connect(Number(port), '127.0.0.1');
    let data = '';
    const statusLines = () => [...data.matchAll(/HTTP\/1\.1 \d{3} [^\r]*/g)].map((m) => m[0]);
    socket.on('data', (chunk: Buffer) => {
      data += chunk.toString('latin1');
      if (statusLines().filter((line) => !line.startsWith('HTTP/1.1 100 ')).length >= finals) socket.destroy();
    });
    socket.on('close', () => resolve(statusLines()));
    // A reset while the rest is still being written: what was answered before it counts.
    socket.on('error', () => resolve(statusLines()));
    socket.write(bytes);
  });
}

describe('a chunked body over the admin API limit, with Expect: 100-continue, on a kept-alive connection', () => {
  it('is answered 413, and the next request on the connection is answered too (the rest read and dropped)', async () => {
    const g = await gateway({ TOLLGATE_ADMIN_TOKENS: ADMIN_TOKENS });
    const piece = 'x'.repeat(8192);
    // 104 KiB in 8 KiB chunks: past the admin API's 64 KiB while it streams (no length declared).
    const body = `${`${piece.length.toString(16)}\r\n${piece}\r\n`.repeat(13)}0\r\n\r\n`;
    const head = `POST /admin/v1/keys HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${OPS_TOKEN}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n`;
    expect(await pipelined(g.adminUrl, `${head}${body}GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n`, 2)).toEqual([
      'HTTP/1.1 100 Continue',
      'HTTP/1.1 413 Payload Too Large',
      'HTTP/1.1 200 OK',
    ]);
  });
});

describe('Expect: 100-continue with the framing a client may lie about', () => {
  it('chunked: 100 then the answer; no credential: 401 at once; more bytes than declared: closed, never a wrong answer', async () => {
    const g = await gateway({ TOLLGATE_ADMIN_TOKENS: ADMIN_TOKENS });
    const body = JSON.stringify({ plan: 'pro', name: 'framed' });
    const post = (auth: string, framing: string) =>
      `POST /admin/v1/keys HTTP/1.1\r\nHost: a\r\n${auth}Content-Type: application/json\r\n${framing}Expect: 100-continue\r\n\r\n`;
    const healthz = 'GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n';
    const chunked = `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
    const auth = `Authorization: Bearer ${OPS_TOKEN}\r\n`;
    expect(await pipelined(g.adminUrl, post(auth, 'Transfer-Encoding: chunked\r\n') + chunked + healthz, 2)).toEqual([
      'HTTP/1.1 100 Continue',
      'HTTP/1.1 201 Created',
      'HTTP/1.1 200 OK',
    ]);
    // Not invited, the body is not read: the connection closes after the answer (Node's rule for a
    // 100 never sent), so the body sent anyway is never read as a request.
    expect(await pipelined(g.adminUrl, post('', `Content-Length: ${body.length}\r\n`) + body + healthz, 2)).toEqual([
      'HTTP/1.1 401 Unauthorized',
    ]);
    // Bytes past the declared length are the next request, which is not HTTP: the connection is cut
    // (client-errors.ts writes nothing while an earlier request awaits its answer), or, had the
    // first been answered already, both are refused: never a key created from a cut body.
    const lied = await pipelined(g.adminUrl, post(auth, `Content-Length: ${body.length - 3}\r\n`) + body + healthz, 2);
    for (const line of lied) expect(line).toMatch(/^HTTP\/1\.1 400 /);
  });
});

describe('a bad TOLLGATE_ADMIN_TOKENS', () => {
  it.each([
    ['a short token', 'ops:short-but-secret-value'],
    ['no label', 'abcdefghijklmnopqrstuvwxyz0123456789ABCD'],
  ])('stops the gateway at start (%s), naming the variable but not the token', async (_name, value) => {
    const process = TollgateProcess.spawn(['gateway'], {
      GATEWAY_PORT: '0',
      ADMIN_PORT: '0',
      UPSTREAM_URL: upstream.url,
      TOLLGATE_ADMIN_TOKENS: value,
    });
    expect(await process.wait()).not.toBe(0);
    const output = process.output();
    expect(output).toContain('TOLLGATE_ADMIN_TOKENS');
    expect(output).not.toContain(value.split(':').pop()!);
  });
});

describe('tollgate check-config', () => {
  it('checks TOLLGATE_ADMIN_TOKENS too, without printing the token', async () => {
    const bad = await runCli(['check-config'], { TOLLGATE_ADMIN_TOKENS: 'ops:too-short-secret' });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/TOLLGATE_ADMIN_TOKENS: entry 1 \(ops\): the token must be at least 32 bytes/);
    expect(bad.stderr).not.toContain('too-short-secret');
    const good = await runCli(['check-config'], { TOLLGATE_ADMIN_TOKENS: ADMIN_TOKENS });
    expect(good.code, good.stderr).toBe(0);
  });
});
