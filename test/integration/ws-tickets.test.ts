import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { awayFromDayEdge } from '../helpers/windows.js';
import { TestRedis } from '../helpers/redis-server.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/ws-echo-upstream.js';
import { bearer, createKey, keysCli, startGateway, type CreatedKey, type GatewayHandle } from '../helpers/stack.js';
import { openWebSocket, echoes } from '../helpers/websocket-client.js';

/**
 * WebSocket tickets with real processes: two gateway replicas on one redis-server, a `ws` echo
 * upstream. A ticket minted on A opens a WebSocket on B once; the ticket never reaches the upstream
 * nor any log line.
 */
let redis: TestRedis;
let upstream: EchoUpstream;
let a: GatewayHandle;
let b: GatewayHandle;
let key: CreatedKey;

beforeAll(async () => {
  redis = await TestRedis.start();
  upstream = await startEchoUpstream();
  [a, b] = await Promise.all([
    startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: upstream.url }),
    startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: upstream.url }),
  ]);
  // A day as small as the minute: counts compared below change only at midnight.
  key = await createKey(redis, ['--plan', 'free', '--per-minute', '50', '--per-day', '50']);
  await awayFromDayEdge();
}, 90_000);

afterAll(async () => {
  await Promise.all([a?.process.stop(), b?.process.stop()]);
  await upstream?.close();
  await redis?.stop();
});

async function mint(gateway: GatewayHandle, apiKey = key.key): Promise<{ status: number; body: any; remaining: string | null }> {
  const res = await fetch(`${gateway.url}/v1/ws-tickets`, { method: 'POST', headers: bearer(apiKey) });
  return { status: res.status, body: await res.json(), remaining: res.headers.get('x-ratelimit-remaining') };
}

const wsUrl = (gateway: GatewayHandle, path: string) => gateway.url.replace(/^http/, 'ws') + path;

describe('POST /v1/ws-tickets', () => {
  it('mints a 30-second ticket for the key, counted like a request', async () => {
    const first = await mint(a);
    expect(first.status).toBe(201);
    expect(first.body).toEqual({ ticket: expect.stringMatching(/^tgws_[A-Za-z0-9_-]{43}$/), expiresInSeconds: 30 });
    const second = await mint(a);
    expect(Number(second.remaining)).toBe(Number(first.remaining) - 1);
  });

  it('needs a key, and only POST', async () => {
    const res = await fetch(`${a.url}/v1/ws-tickets`, { method: 'POST' });
    expect(res.status).toBe(401);
    expect((await res.json()).code).toBe('missing_api_key');
    const get = await fetch(`${a.url}/v1/ws-tickets`, { headers: bearer(key.key) });
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
  });
});

describe('a WebSocket handshake with a ticket', () => {
  it('minted on A opens on B once, in the query; the upstream sees neither the ticket nor a key', async () => {
    const { ticket } = (await mint(a)).body;
    const before = upstream.handshakes.length;
    const { ws } = await openWebSocket(wsUrl(b, `/v1/live?room=7&ticket=${ticket}&x=1`));
    expect(ws).toBeDefined();
    expect(await echoes(ws!)).toBe('echo:ping');
    const seen = upstream.handshakes[before]!;
    expect(seen.url).toBe('/v1/live?room=7&x=1');
    expect(seen.headers['x-tollgate-consumer-id']).toBe(key.id);
    expect(JSON.stringify(seen.headers)).not.toContain(ticket);
    ws!.close();
    // Used: refused on either replica.
    for (const gateway of [a, b]) {
      const again = await openWebSocket(wsUrl(gateway, `/v1/live?ticket=${ticket}`));
      expect(again.status).toBe(401);
      expect(JSON.parse(again.body!).code).toBe('invalid_ws_ticket');
    }
  });

  it('in Sec-WebSocket-Protocol: taken out before the upstream; the 101 names the entry when the upstream picks none', async () => {
    const { ticket } = (await mint(a)).body;
    const before = upstream.handshakes.length;
    const { ws } = await openWebSocket(wsUrl(b, '/v1/live'), [`tollgate.ticket.${ticket}`]);
    expect(ws!.protocol).toBe(`tollgate.ticket.${ticket}`);
    expect(await echoes(ws!)).toBe('echo:ping');
    expect(upstream.handshakes[before]!.headers['sec-websocket-protocol']).toBeUndefined();
    ws!.close();
    const again = await openWebSocket(wsUrl(a, '/v1/live'), [`tollgate.ticket.${ticket}`]);
    expect(again.status).toBe(401);
  });

  it('beside an application subprotocol: the upstream sees and picks only that one', async () => {
    const { ticket } = (await mint(b)).body;
    const before = upstream.handshakes.length;
    const { ws } = await openWebSocket(wsUrl(a, '/v1/live'), [`tollgate.ticket.${ticket}`, 'chat']);
    expect(ws!.protocol).toBe('chat');
    expect(upstream.handshakes[before]!.headers['sec-websocket-protocol']).toBe('chat');
    ws!.close();
  });

  it('is refused when unknown, malformed, or its key was revoked since', async () => {
    expect((await openWebSocket(wsUrl(a, `/v1/live?ticket=tgws_${'A'.repeat(43)}`))).status).toBe(401);
    expect((await openWebSocket(wsUrl(a, '/v1/live?ticket=nope'))).status).toBe(401);
    const doomed = await createKey(redis, ['--plan', 'free']);
    const { ticket } = (await mint(a, doomed.key)).body;
    expect((await keysCli(redis, ['revoke', doomed.id])).code).toBe(0);
    const refused = await openWebSocket(wsUrl(b, `/v1/live?ticket=${ticket}`));
    expect(refused.status).toBe(401);
    expect(JSON.parse(refused.body!).code).toBe('revoked_api_key');
  });

  it('counts the handshake against the quota like any other', async () => {
    const counted = await createKey(redis, ['--plan', 'free', '--per-minute', '50', '--per-day', '50']);
    const minted = await mint(a, counted.key);
    const { ws } = await openWebSocket(wsUrl(b, `/v1/live?ticket=${minted.body.ticket}`));
    ws!.close();
    const usage = await fetch(`${a.url}/v1/usage`, { headers: bearer(counted.key) });
    expect(usage.headers.get('x-ratelimit-remaining')).toBe(String(Number(minted.remaining) - 1));
  });

  it('no ticket appears in either gateway’s output', async () => {
    const { ticket } = (await mint(a)).body;
    const { ws } = await openWebSocket(wsUrl(b, `/v1/live?ticket=${ticket}`));
    ws!.close();
    await openWebSocket(wsUrl(a, `/v1/live?ticket=${ticket}`));
    for (const gateway of [a, b]) expect(gateway.process.output()).not.toMatch(/tgws_/);
  });
});
