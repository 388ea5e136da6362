import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { exchange, headerOf } from '../helpers/raw-client.js';
import { TestRedis } from '../helpers/redis-server.js';
import { configCopy, createKey, keysCli, startGateway, type CreatedKey, type GatewayHandle } from '../helpers/stack.js';

/**
 * WebSocket through the gateway (issue 23, item 4): the handshake passes the policy chain like any
 * request (authenticated, counted once), then frames go both ways to a real `ws` server; an idle
 * tunnel is closed, and so is one whose key is revoked. Other upgrades (h2c) are served as plain
 * requests and the connection closed, so nothing pipelined behind them hangs.
 */
const IDLE_MS = 1500;

let redis: TestRedis;
let upstream: Server;
let wss: WebSocketServer;
let gateway: GatewayHandle;
let key: CreatedKey;
let port = 0;
const handshakes: IncomingHttpHeaders[] = [];

beforeAll(async () => {
  redis = await TestRedis.start();
  upstream = createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ path: req.url, upgrade: req.headers.upgrade ?? null }));
  });
  wss = new WebSocketServer({ noServer: true });
  upstream.on('upgrade', (req, socket, head) => {
    handshakes.push(req.headers);
    if (req.url?.startsWith('/v1/ws/refused')) {
      socket.end('HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\ncontent-length: 7\r\nconnection: close\r\n\r\nrefused');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      ws.on('message', (data, isBinary) => ws.send(isBinary ? data : `echo:${String(data)}`, { binary: isBinary }));
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const config = configCopy({
    'gateway.yaml': (t) => t.replace('webSocketIdleTimeoutMs: 60000', `webSocketIdleTimeoutMs: ${IDLE_MS}`),
  });
  gateway = await startGateway({
    REDIS_URL: redis.url,
    UPSTREAM_URL: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
    TOLLGATE_CONFIG_DIR: config,
  });
  port = Number(new URL(gateway.url).port);
  key = await createKey(redis, ['--plan', 'free']);
});

afterAll(async () => {
  await gateway?.process.stop();
  wss?.close();
  upstream?.closeAllConnections();
  await new Promise((resolve) => upstream?.close(resolve));
  await redis?.stop();
});

function openSocket(path: string, apiKey?: string): Promise<{ ws: WebSocket; headers: IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}${path}`, { headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {} });
    ws.once('upgrade', (res) => ws.once('open', () => resolve({ ws, headers: res.headers })));
    ws.once('unexpected-response', (_req, res) => reject(new Error(`handshake answered ${res.statusCode}`)));
    ws.once('error', reject);
  });
}

const nextMessage = (ws: WebSocket) => new Promise<string>((resolve) => ws.once('message', (data) => resolve(String(data))));
const closed = (ws: WebSocket) => new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));

describe('WebSocket upgrades', () => {
  it('an authenticated handshake is proxied, counted once, and frames flow both ways', async () => {
    const before = handshakes.length;
    const { ws, headers } = await openSocket('/v1/ws/chat', key.key);
    expect(headers['x-ratelimit-remaining']).toBe('59');
    for (let i = 0; i < 20; i++) {
      const reply = nextMessage(ws);
      ws.send(`hello ${i}`);
      expect(await reply).toBe(`echo:hello ${i}`);
    }
    // The upstream saw the consumer, never the client's credentials.
    const seen = handshakes[before]!;
    expect(seen.authorization).toBeUndefined();
    expect(seen['x-tollgate-consumer-id']).toBe(key.id);
    expect(seen['x-tollgate-assertion']).toBeTruthy();
    ws.close();
    await closed(ws);
    // Twenty messages cost nothing: the next request is the key's second.
    const next = await fetch(`${gateway.url}/v1/categories`, { headers: { authorization: `Bearer ${key.key}` } });
    await next.arrayBuffer();
    expect(next.headers.get('x-ratelimit-remaining')).toBe('58');
  });

  it('a handshake without a key is refused 401 and the connection closed, pipelined bytes unanswered', async () => {
    const result = await exchange(
      port,
      [
        'GET /v1/ws/chat HTTP/1.1\r\nHost: gateway.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n' +
          'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n' +
          'GET /v1/categories HTTP/1.1\r\nHost: gateway.test\r\n\r\n',
      ],
      { waitForClose: true, boundMs: 5000 },
    );
    expect(result.responses.map((r) => r.status)).toEqual([401]);
    expect(result.closed).toBe(true);
  });

  it('a target refusing the handshake: its answer is relayed and the connection closed', async () => {
    await expect(openSocket('/v1/ws/refused', key.key)).rejects.toThrow('handshake answered 403');
  });

  it('`Upgrade: h2c` is ignored: served as a plain request, then the connection closes (no hang)', async () => {
    const result = await exchange(
      port,
      [
        `GET /v1/plain HTTP/1.1\r\nHost: gateway.test\r\nAuthorization: Bearer ${key.key}\r\n` +
          'Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n' +
          `GET /v1/pipelined HTTP/1.1\r\nHost: gateway.test\r\nAuthorization: Bearer ${key.key}\r\n\r\n`,
      ],
      { waitForClose: true, boundMs: 5000 },
    );
    expect(result.closed).toBe(true);
    expect(result.responses.map((r) => r.status)).toEqual([200]);
    // The upstream got a plain GET: no Upgrade passed on.
    expect(JSON.parse(result.responses[0]!.body)).toEqual({ path: '/v1/plain', upgrade: null });
    expect(headerOf(result.responses[0], 'connection')).toBe('close');
  });

  it('a tunnel without traffic is closed after the idle limit', async () => {
    const { ws } = await openSocket('/v1/ws/idle', key.key);
    const startedAt = Date.now();
    const code = await closed(ws);
    const elapsed = Date.now() - startedAt;
    expect(code).toBe(1006);
    expect(elapsed).toBeGreaterThanOrEqual(IDLE_MS - 100);
    // Closed by the idle limit, not by anything much later; generous for a loaded machine.
    expect(elapsed).toBeLessThan(IDLE_MS + 30_000);
  });

  it('a revoked key closes its open tunnels', async () => {
    const own = await createKey(redis, ['--plan', 'free']);
    const { ws } = await openSocket('/v1/ws/revoked', own.key);
    const reply = nextMessage(ws);
    ws.send('still here');
    expect(await reply).toBe('echo:still here');
    const wasClosed = closed(ws);
    expect((await keysCli(redis, ['revoke', own.id])).code).toBe(0);
    expect(await wasClosed).toBe(1006);
    await expect(openSocket('/v1/ws/revoked', own.key)).rejects.toThrow('handshake answered 401');
  });
});
