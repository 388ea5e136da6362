import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allowFields, call, preflight } from '../helpers/cors-stack.js';
import { TestRedis } from '../helpers/redis-server.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/ws-echo-upstream.js';
import { bearer, configCopy, createKey, startGateway, type CreatedKey, type GatewayHandle } from '../helpers/stack.js';
import { openWebSocket } from '../helpers/websocket-client.js';

/**
 * CORS and WebSocket tickets, attacked: look-alike origins, a fault's 500, a ticket outside a real
 * handshake, two replicas racing one ticket. Two real gateway processes on one redis-server (fault
 * injection armed: TOLLGATE_TEST_FAULTS=1), in front of a `ws` echo upstream.
 */
const APP = 'https://app.example';

let redis: TestRedis;
let upstream: EchoUpstream;
let a: GatewayHandle;
let b: GatewayHandle;
let key: CreatedKey;

beforeAll(async () => {
  redis = await TestRedis.start();
  upstream = await startEchoUpstream();
  const configDir = configCopy({
    'gateway.yaml': (t) =>
      t.replace(/unauthenticated:\n {2}perMinute: 60/, 'unauthenticated:\n  perMinute: 10000') +
      `\ncors:\n  origins: [${APP}, "https://*.example.org"]\n`,
  });
  const env = { REDIS_URL: redis.url, UPSTREAM_URL: upstream.url, TOLLGATE_CONFIG_DIR: configDir, TOLLGATE_TEST_FAULTS: '1' };
  [a, b] = await Promise.all([startGateway(env), startGateway(env)]);
  key = await createKey(redis, ['--plan', 'free', '--per-minute', '1000', '--per-day', '10000']);
}, 90_000);

afterAll(async () => {
  await Promise.all([a?.process.stop(), b?.process.stop()]);
  await upstream?.close();
  await redis?.stop();
});

describe('look-alike origins', () => {
  const lookAlikes = [
    'https://app.example.evil.com',
    'https://evilapp.example',
    'https://app.examplee',
    'https://app.example.',
    'https://APP.EXAMPLE',
    'https://app.example:443',
    'https://app.example:8443',
    'http://app.example',
    'https://user@app.example',
    'https://app.example@evil.com',
    'https://app.example/',
    'https://app.example, https://evil.example',
    'null',
    'https://example.org',
    'https://a.b.example.org',
    'https://.example.org',
    'https://shop.example.org.',
    'https://SHOP.example.org',
    'https://shop.example.org:8443',
    'https://evil.com/.example.org',
    'https://evil.com#.example.org',
    'https://evil.com?.example.org',
    'https://evil@shop.example.org',
    'https://evilexample.org',
    'https://-.example.org',
  ];

  it('get no Access-Control-Allow-* field on a preflight (403) nor on an actual request', async () => {
    for (const origin of lookAlikes) {
      const pre = await preflight(`${a.url}/v1/pets`, origin);
      expect(pre.status, origin).toBe(403);
      expect(allowFields(pre.headers), origin).toEqual([]);
      const actual = await call(`${a.url}/v1/pets`, { headers: { origin, ...bearer(key.key) } });
      expect(actual.status, origin).toBe(200);
      expect(allowFields(actual.headers), origin).toEqual([]);
      expect(actual.headers.vary, origin).toMatch(/\bOrigin\b/);
    }
  });

  it('the real ones still pass', async () => {
    for (const origin of [APP, 'https://shop.example.org', 'https://x-1.example.org']) {
      const res = await call(`${a.url}/v1/pets`, { headers: { origin, ...bearer(key.key) } });
      expect(res.headers['access-control-allow-origin'], origin).toBe(origin);
    }
  });
});

describe('a fault of the gateway (500 internal_error)', () => {
  it('carries CORS for an allowed origin, and none for another', async () => {
    // policy:3 is authentication, after cors (start-gateway.ts's chain).
    const allowed = await call(`${a.url}/v1/pets`, { headers: { origin: APP, 'x-test-fault': 'policy:3', ...bearer(key.key) } });
    expect(allowed.status).toBe(500);
    expect(JSON.parse(allowed.body).code).toBe('internal_error');
    expect(allowed.headers['access-control-allow-origin']).toBe(APP);
    expect(allowed.headers.vary).toMatch(/\bOrigin\b/);
    const other = await call(`${a.url}/v1/pets`, {
      headers: { origin: 'https://evil.example', 'x-test-fault': 'policy:3', ...bearer(key.key) },
    });
    expect(other.status).toBe(500);
    expect(allowFields(other.headers)).toEqual([]);
    expect(other.headers.vary).toMatch(/\bOrigin\b/);
  });
});

async function mint(gateway: GatewayHandle, apiKey = key.key): Promise<string> {
  const res = await fetch(`${gateway.url}/v1/ws-tickets`, { method: 'POST', headers: bearer(apiKey) });
  expect(res.status).toBe(201);
  return ((await res.json()) as { ticket: string }).ticket;
}

const wsUrl = (gateway: GatewayHandle, path: string) => gateway.url.replace(/^http/, 'ws') + path;

describe('a WebSocket ticket', () => {
  it('does not authenticate a plain request that only claims Upgrade: websocket (no Connection: upgrade)', async () => {
    const ticket = await mint(a);
    const res = await call(`${b.url}/v1/live?ticket=${ticket}`, { headers: { upgrade: 'websocket', connection: 'keep-alive' } });
    expect(res.status).toBe(401);
    expect(JSON.parse(res.body).code).toBe('missing_api_key');
    // Still unused: the real handshake it was minted for opens.
    const { ws } = await openWebSocket(wsUrl(a, `/v1/live?ticket=${ticket}`));
    expect(ws).toBeDefined();
    ws!.close();
  });

  it('does not authenticate a POST, nor a request with the ticket as its bearer', async () => {
    const ticket = await mint(a);
    const post = await call(`${b.url}/v1/live?ticket=${ticket}`, {
      method: 'POST',
      headers: { upgrade: 'websocket', connection: 'upgrade' },
    });
    expect(post.status).toBe(401);
    const asBearer = await call(`${b.url}/v1/pets`, { headers: bearer(ticket) });
    expect(asBearer.status).toBe(401);
  });

  it('opens one WebSocket when two replicas race it', async () => {
    for (let round = 0; round < 5; round++) {
      const ticket = await mint(a);
      const results = await Promise.all([
        openWebSocket(wsUrl(a, `/v1/live?ticket=${ticket}`)),
        openWebSocket(wsUrl(b, `/v1/live?ticket=${ticket}`)),
      ]);
      expect(results.filter((r) => r.ws).length, `round ${round}`).toBe(1);
      expect(results.filter((r) => r.status === 401).length, `round ${round}`).toBe(1);
      for (const r of results) r.ws?.close();
    }
  });

  it('in the query of a plain GET with a key is never logged', async () => {
    const ticket = await mint(a);
    const res = await call(`${a.url}/v1/pets?ticket=${ticket}`, { headers: bearer(key.key) });
    expect(res.status).toBe(200);
    const refused = await call(`${a.url}/v1/pets?ticket=${ticket}`);
    expect(refused.status).toBe(401);
    expect(refused.body).not.toContain(ticket);
    for (const gateway of [a, b]) expect(gateway.process.output()).not.toContain('tgws_');
  });
});

describe('a WebSocket ticket in a raw handshake', () => {
  /** Sends `head` as written and resolves with the first line of the answer. */
  function rawHandshake(gateway: GatewayHandle, head: string): Promise<string> {
    const { hostname, port } = new URL(gateway.url);
    return new Promise((resolve, reject) => {
      const socket = connect(Number(port), hostname, () => socket.write(head));
      let answer = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => {
        answer += chunk;
        if (answer.includes('\r\n')) {
          resolve(answer.split('\r\n', 1)[0]!);
          socket.destroy();
        }
      });
      socket.on('error', reject);
    });
  }

  const handshake = (path: string, extra: string) =>
    `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n` +
    `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n${extra}\r\n`;

  it('on a second Sec-WebSocket-Protocol line is still taken out before the upstream', async () => {
    const ticket = await mint(a);
    const before = upstream.handshakes.length;
    const status = await rawHandshake(
      b,
      handshake('/v1/live', `Sec-WebSocket-Protocol: chat\r\nSec-WebSocket-Protocol: tollgate.ticket.${ticket}\r\n`),
    );
    expect(status).toBe('HTTP/1.1 101 Switching Protocols');
    const seen = upstream.handshakes[before]!;
    expect(seen.headers['sec-websocket-protocol']).toBe('chat');
    expect(JSON.stringify(seen)).not.toContain(ticket);
  });

  it('sent twice (query and subprotocol) is refused and not forwarded', async () => {
    const ticket = await mint(a);
    const before = upstream.handshakes.length;
    const status = await rawHandshake(b, handshake(`/v1/live?ticket=${ticket}`, `Sec-WebSocket-Protocol: tollgate.ticket.${ticket}\r\n`));
    expect(status).toMatch(/^HTTP\/1\.1 401 /);
    expect(upstream.handshakes.length).toBe(before);
  });
});
