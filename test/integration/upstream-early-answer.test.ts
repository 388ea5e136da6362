import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exchange } from '../helpers/raw-client.js';
import { TestRedis } from '../helpers/redis-server.js';
import { configCopy, createKey, startBackend, startGateway, type CreatedKey, type GatewayHandle } from '../helpers/stack.js';
import type { TollgateProcess } from '../helpers/processes.js';

// An upstream that answers before the client has finished sending its body (413 from a size
// check, 401, 415, …) must never leave the client's connection stuck: the gateway reads and drops
// the rest of that body (bounded), so every later request on the connection gets its answer, and
// a SIGTERM afterwards stops at once. Regression: a 2 MB POST answered 413, then GET, GET on the
// same kept-alive connection hung about half the time, and SIGTERM waited out the whole grace.

let redis: TestRedis;
let backend: { process: TollgateProcess; url: string };
let early: Server;
let earlyUrl: string;
let viaBackend: GatewayHandle;
let viaEarly: GatewayHandle;
let key: CreatedKey;

const TWO_MB = Buffer.alloc(2 * 1024 * 1024, 0x61);

beforeAll(async () => {
  redis = await TestRedis.start();
  backend = await startBackend({ REDIS_URL: redis.url });
  // A plain Node server that answers 413 as soon as the head arrives, never reading the body.
  early = createServer((req, res) => {
    if (req.method === 'POST' || req.method === 'PUT') {
      res.writeHead(413, { 'content-type': 'application/json' });
      res.end('{"code":"too_large"}');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"ok":true}');
  });
  await new Promise<void>((resolve) => early.listen(0, '127.0.0.1', resolve));
  earlyUrl = `http://127.0.0.1:${(early.address() as AddressInfo).port}`;
  // A grace far longer than any test: a shutdown that waits for it fails the test by its timeout.
  const config = configCopy({ 'gateway.yaml': (t) => t.replace(/shutdownGraceSeconds: \d+/, 'shutdownGraceSeconds: 120') });
  [viaBackend, viaEarly] = await Promise.all([
    startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: backend.url, TOLLGATE_CONFIG_DIR: config }),
    startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: earlyUrl, TOLLGATE_CONFIG_DIR: config }),
  ]);
  key = await createKey(redis, ['--plan', 'enterprise']);
});

afterAll(async () => {
  await viaBackend?.process.stop();
  await viaEarly?.process.stop();
  await backend?.process.stop();
  early?.closeAllConnections();
  early?.close();
  await redis?.stop();
});

/** One client connection (like a kept-alive fetch), each request bounded so a hang fails. */
function clientOf(gateway: GatewayHandle): Client {
  return new Client(gateway.url, { pipelining: 1, headersTimeout: 5000, bodyTimeout: 5000 });
}

async function send(client: Client, method: string, path: string, body?: Buffer) {
  const res = await client.request({
    method,
    path,
    headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
    body,
  });
  return { status: res.statusCode, body: await res.body.text() };
}

/** A 2 MB POST answered early, then two GETs on the same client connection; 8 times over. */
async function earlyAnswerThenMore(gateway: GatewayHandle, uploadPath: string, getPath: string): Promise<void> {
  for (let i = 0; i < 8; i++) {
    const client = clientOf(gateway);
    try {
      expect((await send(client, 'POST', uploadPath, TWO_MB)).status).toBe(413);
      expect((await send(client, 'GET', getPath)).status).toBe(200);
      expect((await send(client, 'GET', getPath)).status).toBe(200);
    } finally {
      await client.close();
    }
  }
}

describe('early upstream answers', () => {
  it('413 from the bundled backend for a 2 MB POST, then GET, GET on the same connection, 8 times', async () => {
    await earlyAnswerThenMore(viaBackend, '/v1/categories', '/v1/categories');
  });

  it('413 from an upstream that never reads the body, then more requests on the same connection', async () => {
    await earlyAnswerThenMore(viaEarly, '/v1/upload', '/v1/a');
  });

  it('keeps the connection usable: the rest of the body is read and dropped, and the next request on the wire is answered', async () => {
    const port = Number(new URL(viaEarly.url).port);
    const auth = `Host: gw.test\r\nAuthorization: Bearer ${key.key}\r\n`;
    const total = 256 * 1024;
    const head = `POST /v1/upload HTTP/1.1\r\n${auth}Content-Length: ${total}\r\n\r\n`;
    // The head and a first slice go at once; the rest after the early answer had time to arrive.
    const result = await exchange(
      port,
      [head + 'x'.repeat(1024), Buffer.alloc(total - 1024, 0x78), `GET /v1/after HTTP/1.1\r\n${auth}\r\n`],
      { finalResponses: 2, gapMs: 200, boundMs: 8000 },
    );
    expect(result.responses.map((r) => r.status)).toEqual([413, 200]);
  });

  it('a chunked body answered early: the rest is dropped up to its last chunk, and the next request answered', async () => {
    const port = Number(new URL(viaEarly.url).port);
    const auth = `Host: gw.test\r\nAuthorization: Bearer ${key.key}\r\n`;
    const chunk = (n: number) => `${n.toString(16)}\r\n${'y'.repeat(n)}\r\n`;
    const result = await exchange(
      port,
      [
        `PUT /v1/upload HTTP/1.1\r\n${auth}Transfer-Encoding: chunked\r\n\r\n${chunk(4000)}`,
        chunk(60_000) + chunk(60_000) + '0\r\n\r\n',
        `GET /v1/after HTTP/1.1\r\n${auth}\r\n`,
      ],
      { finalResponses: 2, gapMs: 200, boundMs: 8000 },
    );
    expect(result.responses.map((r) => r.status)).toEqual([413, 200]);
  });

  it('closes the connection once more than the bounded rest arrives, after the early answer was delivered', async () => {
    const port = Number(new URL(viaEarly.url).port);
    const auth = `Host: gw.test\r\nAuthorization: Bearer ${key.key}\r\n`;
    const declared = 64 * 1024 * 1024;
    const result = await exchange(
      port,
      [`POST /v1/upload HTTP/1.1\r\n${auth}Content-Length: ${declared}\r\n\r\n` + 'z'.repeat(1024), Buffer.alloc(12 * 1024 * 1024, 0x7a)],
      { waitForClose: true, gapMs: 200, boundMs: 10_000 },
    );
    expect(result.responses.map((r) => r.status)).toEqual([413]);
    expect(result.closed).toBe(true);
  });

  it('stops at once on SIGTERM after early answers, with nothing in flight', async () => {
    const client = clientOf(viaEarly);
    try {
      await send(client, 'POST', '/v1/upload', TWO_MB).catch(() => undefined);
      expect((await send(client, 'GET', '/v1/a')).status).toBe(200);
    } finally {
      await client.close();
    }
    // The grace is 120 s and the test's timeout 30 s: waiting out the grace fails here.
    expect(await viaEarly.process.stop('SIGTERM', 60_000)).toBe(0);
  });
});
