import type { ClientHttp2Session } from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EdgeStack } from '../helpers/edge-stack.js';
import { h2Request, h2Session } from '../helpers/h2-client.js';
import { FLAG, FRAME, getRequest, H2_ERROR, headerBlock, RawH2 } from '../helpers/raw-h2.js';
import { createKey, type CreatedKey } from '../helpers/stack.js';
import { TestCerts } from '../helpers/tls-certs.js';

// The known HTTP/2 floods, sent raw over TLS on loopback with bounded loops (issue 23, item 2):
// rapid reset (CVE-2023-44487), CONTINUATION without END_HEADERS (CVE-2024-27983), SETTINGS and
// PING floods. Each ends at most the attacker's own connection: the process stays up, and another
// client (its own key, its own connection) is served at once afterwards.

/**
 * The upstream timeout here, long on purpose: a request stuck behind upstream connections the attack
 * left held would wait for it (timers never fire early), so being served sooner proves none was,
 * however loaded the machine.
 */
const UPSTREAM_TIMEOUT_MS = 30_000;

let certs: TestCerts;
let stack: EdgeStack;
let victim: CreatedKey;

beforeAll(async () => {
  certs = new TestCerts();
  const pair = certs.make('gateway');
  stack = await EdgeStack.start({
    env: { GATEWAY_TLS_CERT: pair.cert, GATEWAY_TLS_KEY: pair.key },
    gatewayYaml: (t) => t.replace(/^ {2}timeoutMs: 1500\b/m, `  timeoutMs: ${UPSTREAM_TIMEOUT_MS}`),
  });
  victim = await createKey(stack.redis, ['--plan', 'enterprise']);
});
afterAll(async () => {
  await stack?.stop();
  certs?.remove();
});

/** Lets the event loop write what was queued, every `every` frames. */
const breathe = (i: number, every = 500) => (i % every === 0 ? new Promise((r) => setImmediate(r)) : undefined);

/** Another client is served, quickly, on a new connection; and the process is still the same one. */
async function othersAreServed(): Promise<void> {
  expect(stack.gateway.process.exitStatus).toBeNull();
  const started = performance.now();
  const session: ClientHttp2Session = await h2Session(stack.gateway.url);
  try {
    for (const path of ['/v1/categories', '/v1/pets/1']) {
      const response = await h2Request(session, { ':path': path, authorization: `Bearer ${victim.key}` });
      expect(response.status).toBe(200);
    }
  } finally {
    session.close();
  }
  // Before the upstream timeout: no upstream connection is left held by the attack.
  expect(performance.now() - started).toBeLessThan(UPSTREAM_TIMEOUT_MS);
  const metrics = await stack.metrics();
  expect(metrics).toMatch(/tollgate_uncaught_errors_total 0/);
}

describe('HTTP/2 floods end only the attacker’s connection', () => {
  it('rapid reset: 10,000 streams opened and reset at once', async () => {
    const raw = await RawH2.connect(stack.port);
    const auth: [string, string] = ['authorization', `Bearer ${stack.key.key}`];
    let sent = 0;
    for (let i = 0; i < 10_000 && !raw.closed; i++) {
      const id = 1 + 2 * i;
      raw.headers(id, getRequest('/v1/categories', [auth]));
      raw.rst(id);
      sent++;
      await breathe(i);
    }
    // Ended after MAX_CLIENT_RESETS (tls-listener.ts) with GOAWAY ENHANCE_YOUR_CALM, long before the 10,000th.
    expect(await raw.untilClosed(5000)).toBe(true);
    expect(sent).toBeLessThan(10_000);
    const goaway = raw.frames.find((f) => f.type === FRAME.GOAWAY);
    if (goaway) expect(goaway.payload.readUInt32BE(4)).toBe(H2_ERROR.ENHANCE_YOUR_CALM);
    await stack.gateway.process.waitForLog('HTTP/2 session ended: too many streams reset by the client');
    await othersAreServed();
  });

  it('CONTINUATION without END_HEADERS: the session is closed, before its header list grows past the limits', async () => {
    const raw = await RawH2.connect(stack.port);
    raw.send(FRAME.HEADERS, FLAG.END_STREAM, 1, headerBlock(getRequest('/v1/categories', [['authorization', `Bearer ${stack.key.key}`]])));
    const piece = headerBlock([['x-a', 'b']]);
    let sent = 0;
    for (; sent < 20_000 && !raw.closed; sent++) {
      raw.send(FRAME.CONTINUATION, 0, 1, piece);
      await breathe(sent);
    }
    expect(await raw.untilClosed(5000)).toBe(true);
    expect(sent).toBeLessThan(20_000);
    // Nothing of it became a request.
    expect(raw.frames.filter((f) => f.type === FRAME.HEADERS)).toEqual([]);
    await othersAreServed();
  });

  for (const [name, type, payloadBytes] of [
    ['SETTINGS', FRAME.SETTINGS, 0],
    ['PING', FRAME.PING, 8],
  ] as const) {
    it(`${name} flood (50,000 frames, their ACKs never read): the session is closed`, async () => {
      const raw = await RawH2.connect(stack.port);
      // The attacker reads nothing, so the ACKs pile up on the server's side.
      raw.socket.pause();
      const payload = Buffer.alloc(payloadBytes);
      let sent = 0;
      for (; sent < 50_000 && !raw.closed; sent++) {
        raw.send(type, 0, 0, payload);
        await breathe(sent);
      }
      raw.socket.resume();
      expect(await raw.untilClosed(5000)).toBe(true);
      expect(sent).toBeLessThan(50_000);
      await othersAreServed();
    });
  }
});
