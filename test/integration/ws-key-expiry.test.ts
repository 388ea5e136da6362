import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { TestRedis } from '../helpers/redis-server.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/ws-echo-upstream.js';
import { bearer, createKey, keysCli, startGateway, type CreatedKey, type GatewayHandle } from '../helpers/stack.js';
import { echoes } from '../helpers/websocket-client.js';

// A WebSocket tunnel opened with an API key that has an expiry ends when the key does: the client
// gets a close frame 1008 "The API key expired." at the key's expiresAt (as it stands then: an
// expiry moved while the tunnel is open moves the close), whether the handshake carried the key
// or a ticket minted with it (docs/cors-and-websockets.md).

let redis: TestRedis;
let upstream: EchoUpstream;
let gateway: GatewayHandle;
/** The longest a `tollgate keys` command took here (ms): expiries below are set from it. */
let cliMs = 0;

beforeAll(async () => {
  [redis, upstream] = await Promise.all([TestRedis.start(), startEchoUpstream()]);
  gateway = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: upstream.url });
  // Measured on the real binary (the set-expiry below runs it; createKey runs in-process and is faster).
  const started = Date.now();
  expect((await keysCli(redis, ['create', '--plan', 'free', '--json'])).code).toBe(0);
  cliMs = Date.now() - started;
}, 90_000);

afterAll(async () => {
  await gateway?.process.stop();
  await upstream?.close();
  await redis?.stop();
});

/** An expiry far enough ahead for `commands` CLI runs as measured, several times over, and a second more. */
function expiryAfter(commands: number): Date {
  return new Date(Date.now() + 1000 + 3 * commands * cliMs);
}

async function keyExpiringAt(at: Date): Promise<CreatedKey> {
  const started = Date.now();
  const created = await createKey(redis, ['--plan', 'free', '--expires-at', at.toISOString()]);
  cliMs = Math.max(cliMs, Date.now() - started);
  return created;
}

interface Opened {
  ws: WebSocket;
  /** The close as the client saw it, and when (ms since the epoch). */
  closed: Promise<{ code: number; reason: string; atMs: number }>;
}

function open(path: string, headers: Record<string, string> = {}): Promise<Opened> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(gateway.url.replace(/^http/, 'ws') + path, { headers });
    const closed = new Promise<{ code: number; reason: string; atMs: number }>((done) =>
      ws.once('close', (code, reason) => done({ code, reason: String(reason), atMs: Date.now() })),
    );
    ws.once('open', () => resolve({ ws, closed }));
    ws.once('unexpected-response', (_req, res) => reject(new Error(`handshake answered ${res.statusCode}`)));
    ws.once('error', reject);
  });
}

async function ticketFor(apiKey: string): Promise<string> {
  const res = await fetch(`${gateway.url}/v1/ws-tickets`, { method: 'POST', headers: bearer(apiKey) });
  expect(res.status).toBe(201);
  return ((await res.json()) as { ticket: string }).ticket;
}

// Concurrent: each test waits for its own keys' expiries (distinct keys), so the waits overlap.
describe.concurrent('a WebSocket tunnel opened with an expiring API key', () => {
  it('is closed with 1008 at the key’s expiresAt, opened with the key or with a ticket of it', async () => {
    const at = expiryAfter(2);
    const expiring = await keyExpiringAt(at);
    const lasting = await createKey(redis, ['--plan', 'free']);
    const byKey = await open('/v1/live', bearer(expiring.key));
    const byTicket = await open(`/v1/live?ticket=${await ticketFor(expiring.key)}`);
    const other = await open('/v1/live', bearer(lasting.key));
    expect(await echoes(byKey.ws)).toBe('echo:ping');
    expect(await echoes(byTicket.ws)).toBe('echo:ping');

    for (const tunnel of [byKey, byTicket]) {
      const closed = await tunnel.closed;
      expect(closed).toMatchObject({ code: 1008, reason: 'The API key expired.' });
      expect(closed.atMs).toBeGreaterThanOrEqual(at.getTime());
    }
    // A key without an expiry keeps its tunnel.
    expect(await echoes(other.ws)).toBe('echo:ping');
    other.ws.close();
    await other.closed;
  });

  it('follows the key’s expiry as it is changed while the tunnel is open', async () => {
    const at = expiryAfter(3);
    const [kept, moved] = await Promise.all([keyExpiringAt(at), keyExpiringAt(at)]);
    const stays = await open('/v1/live', bearer(kept.key));
    const later = await open('/v1/live', bearer(moved.key));
    const movedTo = new Date(at.getTime() + 3600_000);
    expect((await keysCli(redis, ['set-expiry', moved.id, movedTo.toISOString()])).code).toBe(0);

    // The key whose expiry stayed closes its tunnel at it...
    const closed = await stays.closed;
    expect(closed).toMatchObject({ code: 1008, reason: 'The API key expired.' });
    expect(closed.atMs).toBeGreaterThanOrEqual(at.getTime());
    // ...the one moved an hour later keeps its own past the old expiry.
    expect(await echoes(later.ws)).toBe('echo:ping');
    later.ws.close();
    expect((await later.closed).reason).toBe('');
  });
});
