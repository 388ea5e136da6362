import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JwksServer, mint as sign, signingKey, type SigningKey } from '../helpers/jwks-server.js';
import { TestRedis } from '../helpers/redis-server.js';
import { awayFromDayEdge } from '../helpers/windows.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/ws-echo-upstream.js';
import { bearer, configCopy, startGateway, type GatewayHandle } from '../helpers/stack.js';
import { openWebSocket, echoes } from '../helpers/websocket-client.js';

// WebSocket tickets minted with a JWT access token (docs/cors-and-websockets.md): two gateway
// replicas on one redis-server, a key set the test serves, a `ws` echo upstream. The ticket opens
// a WebSocket as the token's consumer, once, on either replica, and never outlives the token.

const ISSUER = 'https://idp.test/tickets';
const SKEW_SECONDS = 1;
const CONSUMER = 'jwt:ticket-idp:user-t';

let redis: TestRedis;
let jwks: JwksServer;
let key: SigningKey;
let upstream: EchoUpstream;
let a: GatewayHandle;
let b: GatewayHandle;
/** The longest a mint and a handshake took here (ms): margins below are derived from it. */
let roundMs = 0;

const now = () => Math.floor(Date.now() / 1000);
const token = (expSeconds: number, sub = 'user-t') => sign(key, { iss: ISSUER, aud: 'ticket-api', sub, iat: now(), exp: expSeconds });

beforeAll(async () => {
  [redis, jwks, upstream] = await Promise.all([TestRedis.start(), new JwksServer().start(), startEchoUpstream()]);
  key = await signingKey('rsa-tickets');
  jwks.keys = [key.publicJwk];
  const config = configCopy({
    'gateway.yaml': (text) =>
      `${text}
jwt:
  issuers:
    - name: ticket-idp
      issuer: ${ISSUER}
      jwksUri: ${jwks.url}
      audiences: [ticket-api]
      plan: { default: free }
      clockSkewSeconds: ${SKEW_SECONDS}
`,
  });
  [a, b] = await Promise.all([
    startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: upstream.url, TOLLGATE_CONFIG_DIR: config }),
    startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: upstream.url, TOLLGATE_CONFIG_DIR: config }),
  ]);
  await awayFromDayEdge();
}, 90_000);

afterAll(async () => {
  await Promise.all([a?.process.stop(), b?.process.stop()]);
  await upstream?.close();
  await Promise.all([redis?.stop(), jwks?.stop()]);
});

async function mintTicket(gateway: GatewayHandle, credential: string) {
  const res = await fetch(`${gateway.url}/v1/ws-tickets`, { method: 'POST', headers: bearer(credential) });
  return { status: res.status, body: await res.json(), remaining: res.headers.get('x-ratelimit-remaining') };
}

const wsUrl = (gateway: GatewayHandle, path: string) => gateway.url.replace(/^http/, 'ws') + path;

describe('a WebSocket ticket minted with a JWT', () => {
  it('opens a WebSocket on the other replica as the token’s consumer, once', async () => {
    const jwt = await token(now() + 600);
    const started = Date.now();
    const minted = await mintTicket(a, jwt);
    expect(minted.status).toBe(201);
    expect(minted.body).toEqual({ ticket: expect.stringMatching(/^tgws_[A-Za-z0-9_-]{43}$/), expiresInSeconds: 30 });
    const before = upstream.handshakes.length;
    const { ws, status, body } = await openWebSocket(wsUrl(b, `/v1/live?ticket=${minted.body.ticket}`));
    roundMs = Date.now() - started;
    expect({ status, body }).toEqual({ status: undefined, body: undefined });
    expect(await echoes(ws!)).toBe('echo:ping');
    expect(upstream.handshakes[before]!.headers['x-tollgate-consumer-id']).toBe(CONSUMER);
    // The token is not kept for the handshake: the upstream gets no Authorization of any kind.
    expect(upstream.handshakes[before]!.headers.authorization).toBeUndefined();
    ws!.close();
    for (const gateway of [a, b]) {
      const again = await openWebSocket(wsUrl(gateway, `/v1/live?ticket=${minted.body.ticket}`));
      expect(again.status).toBe(401);
      expect(JSON.parse(again.body!).code).toBe('invalid_ws_ticket');
    }
  });

  it('charges the mint and the handshake to the jwt: consumer', async () => {
    const jwt = await token(now() + 600, 'user-quota');
    const minted = await mintTicket(b, jwt);
    expect(minted.status).toBe(201);
    const { ws } = await openWebSocket(wsUrl(a, `/v1/live?ticket=${minted.body.ticket}`));
    ws!.close();
    const usage = await fetch(`${a.url}/v1/usage`, { headers: bearer(jwt) });
    expect(usage.status).toBe(200);
    expect(usage.headers.get('x-ratelimit-remaining')).toBe(String(Number(minted.remaining) - 1));
  });

  it('the tunnel it opens closes with 1008 when the token expires (exp + clock skew)', async () => {
    // Time enough for a mint and a handshake as measured above, several times over.
    const exp = now() + 2 + Math.ceil((4 * roundMs) / 1000);
    const jwt = await token(exp);
    const minted = await mintTicket(a, jwt);
    expect(minted.status).toBe(201);
    const { ws, closed } = await openWebSocket(wsUrl(b, `/v1/live?ticket=${minted.body.ticket}`));
    expect(await echoes(ws!)).toBe('echo:ping');
    const close = await closed!;
    expect(close).toMatchObject({ code: 1008, reason: 'The access token expired.' });
    expect(close.atMs).toBeGreaterThanOrEqual((exp + SKEW_SECONDS) * 1000);
  });

  it('never outlives the token: its life is cut to the token’s', async () => {
    const exp = now() + 10;
    const jwt = await token(exp);
    const asked = Date.now();
    const minted = await mintTicket(a, jwt);
    expect(minted.status).toBe(201);
    // At most what was left of the token when it was asked for (the gateway looked later).
    expect(minted.body.expiresInSeconds).toBeLessThanOrEqual(exp + SKEW_SECONDS - asked / 1000);
    expect(minted.body.expiresInSeconds).toBeGreaterThanOrEqual(1);
  });

  it('is refused for a token with less than a second left', async () => {
    // exp this second: admitted within the skew for under a second more (refused a ticket), then
    // not at all (refused as expired); a 401 invalid_token either way, never a ticket.
    const jwt = await token(now());
    const refused = await mintTicket(a, jwt);
    expect(refused.status).toBe(401);
    expect(refused.body.code).toBe('invalid_token');
  });
});
