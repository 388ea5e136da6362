import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { JwksServer, mint, signingKey, type SigningKey } from '../helpers/jwks-server.js';
import { TestRedis } from '../helpers/redis-server.js';
import { configCopy, startGateway, type GatewayHandle } from '../helpers/stack.js';

// A WebSocket tunnel opened with a JWT access token ends when the token does (its exp, plus the
// issuer's clockSkewSeconds): the client gets a close frame 1008 with a reason, the upstream a
// close frame 1008 too, each at a frame boundary of its direction (docs/identity-providers.md).

const ISSUER = 'https://idp.test/ws';
const SKEW_SECONDS = 1;

let redis: TestRedis;
let jwks: JwksServer;
let key: SigningKey;
let upstream: Server;
let wss: WebSocketServer;
let gateway: GatewayHandle;
/** What the upstream's end of each tunnel heard when it closed, by the path it was opened on. */
const upstreamClosed = new Map<string, { code: number; reason: string }>();
/** The raw upstream socket of /v1/ws/raw (a hand-made WebSocket server that can stop mid-frame). */
let raw: { socket: Socket; heardClose: Promise<Buffer> } | undefined;

const now = () => Math.floor(Date.now() / 1000);
const token = (expSeconds: number) => mint(key, { iss: ISSUER, aud: 'ws-api', sub: 'user-ws', iat: now(), exp: expSeconds });

beforeAll(async () => {
  [redis, jwks] = await Promise.all([TestRedis.start(), new JwksServer().start()]);
  key = await signingKey('rsa-ws');
  jwks.keys = [key.publicJwk];
  wss = new WebSocketServer({ noServer: true });
  upstream = createServer((_req, res) => res.end('{}'));
  upstream.on('upgrade', (req, socket: Socket, head) => {
    if (req.url === '/v1/ws/raw') return rawHandshake(req.headers['sec-websocket-key'] as string, socket);
    wss.handleUpgrade(req, socket, head, (ws) => {
      ws.on('message', (data) => ws.send(`echo:${String(data)}`));
      ws.on('close', (code, reason) => upstreamClosed.set(req.url ?? '', { code, reason: String(reason) }));
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const config = configCopy({
    'gateway.yaml': (text) =>
      `${text}
jwt:
  issuers:
    - name: ws-idp
      issuer: ${ISSUER}
      jwksUri: ${jwks.url}
      audiences: [ws-api]
      plan: { default: pro }
      clockSkewSeconds: ${SKEW_SECONDS}
`,
  });
  gateway = await startGateway({
    REDIS_URL: redis.url,
    UPSTREAM_URL: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
    TOLLGATE_CONFIG_DIR: config,
  });
});

afterAll(async () => {
  await gateway?.process.stop();
  wss?.close();
  upstream?.closeAllConnections();
  await new Promise((resolve) => upstream?.close(resolve));
  await Promise.all([redis?.stop(), jwks?.stop()]);
});

/** A WebSocket server by hand on one socket: answers the handshake, then lets the test write raw frames. */
function rawHandshake(secKey: string, socket: Socket): void {
  const accept = createHash('sha1').update(`${secKey}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
  socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
  const heardClose = new Promise<Buffer>((resolve) => {
    let seen = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      seen = Buffer.concat([seen, chunk]);
      // A masked client frame: opcode 0x8 is Close. Only frames from the gateway arrive here.
      if (seen.length >= 2 && (seen[0]! & 0x0f) === 0x8) resolve(seen);
    });
  });
  raw = { socket, heardClose };
}

interface Opened {
  ws: WebSocket;
  messages: string[];
  /** The close as the client saw it, and when (ms since the epoch). */
  closed: Promise<{ code: number; reason: string; atMs: number }>;
}

function open(path: string, bearer: string): Promise<Opened> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${new URL(gateway.url).port}${path}`, { headers: { authorization: `Bearer ${bearer}` } });
    const messages: string[] = [];
    ws.on('message', (data) => messages.push(String(data)));
    const closed = new Promise<{ code: number; reason: string; atMs: number }>((done) =>
      ws.once('close', (code, reason) => done({ code, reason: String(reason), atMs: Date.now() })),
    );
    ws.once('open', () => resolve({ ws, messages, closed }));
    ws.once('unexpected-response', (_req, res) => reject(new Error(`handshake answered ${res.statusCode}`)));
    ws.once('error', reject);
  });
}

const echo = (ws: WebSocket, text: string) =>
  new Promise<string>((resolve) => {
    ws.once('message', (data) => resolve(String(data)));
    ws.send(text);
  });

describe('a WebSocket tunnel opened with a JWT', () => {
  it('is closed with 1008 on both sides when the token expires (exp + clock skew), not before', async () => {
    const exp = now() + 2;
    const short = await open('/v1/ws/short', await token(exp));
    const long = await open('/v1/ws/long', await token(now() + 600));
    expect(await echo(short.ws, 'hello')).toBe('echo:hello');

    const closed = await short.closed;
    expect(closed).toMatchObject({ code: 1008, reason: 'The access token expired.' });
    expect(closed.atMs).toBeGreaterThanOrEqual((exp + SKEW_SECONDS) * 1000);
    // The upstream's end heard a close frame too (not a cut connection: that is 1006).
    await expect.poll(() => upstreamClosed.get('/v1/ws/short')).toEqual({ code: 1008, reason: 'The access token expired.' });

    // A tunnel of a token still valid is untouched.
    expect(await echo(long.ws, 'still here')).toBe('echo:still here');
    long.ws.close();
    await long.closed;
  });

  it('a frame under way when the token expires is relayed whole before the close frame', async () => {
    const exp = now() + 1;
    const client = await open('/v1/ws/raw', await token(exp));
    // A 10-byte text frame of which only 5 bytes are sent before the token expires.
    raw!.socket.write(Buffer.concat([Buffer.from([0x81, 10]), Buffer.from('hello')]));
    // The gateway sends the upstream its close at once (the client's direction is between frames)...
    const heard = await raw!.heardClose;
    expect(heard[0]).toBe(0x88);
    // ...but the client only once the frame under way is complete.
    expect(client.messages).toEqual([]);
    raw!.socket.end('world');
    const closed = await client.closed;
    expect(client.messages).toEqual(['helloworld']);
    expect(closed).toMatchObject({ code: 1008, reason: 'The access token expired.' });
    expect(closed.atMs).toBeGreaterThanOrEqual((exp + SKEW_SECONDS) * 1000);
  });
});
