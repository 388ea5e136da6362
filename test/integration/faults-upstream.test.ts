import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { openSockets } from '../helpers/open-sockets.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, configCopy, createKey, startGateway, type CreatedKey, type GatewayHandle } from '../helpers/stack.js';

// Upstream faults and client aborts: clean Error bodies or clean closes, no crash, no leaked sockets.

let redis: TestRedis;
let upstream: EchoUpstream;
let gateway: GatewayHandle;
let key: CreatedKey;
const echo = new EchoUpstream().behaviour;

beforeAll(async () => {
  redis = await TestRedis.start();
  upstream = await new EchoUpstream().start();
  const config = configCopy({ 'gateway.yaml': (t) => t.replace('timeoutMs: 15000', 'timeoutMs: 800') });
  gateway = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: upstream.url, TOLLGATE_CONFIG_DIR: config });
  key = await createKey(redis, ['--plan', 'business']);
});

afterAll(async () => {
  await gateway?.process.stop();
  await upstream?.stop();
  await redis?.stop();
});

const get = () => fetch(`${gateway.url}/v1/categories`, { headers: bearer(key.key) });

describe('upstream faults', () => {
  it('cuts the client connection cleanly when the upstream resets mid-response, and stays up', async () => {
    upstream.behaviour = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
      res.write('{"partial":');
      setTimeout(() => res.socket?.destroy(), 50);
    };
    try {
      const res = await get();
      expect(res.status).toBe(200);
      expect(res.headers.get('x-ratelimit-limit')).toBe('1000');
      await expect(res.text()).rejects.toThrow();
    } finally {
      upstream.behaviour = echo;
    }
    expect((await get()).status).toBe(200);
  });

  it('answers 504 with rate-limit headers when the upstream stays silent', async () => {
    upstream.behaviour = () => {}; // never answers
    try {
      const res = await get();
      expect(res.status).toBe(504);
      expect(res.headers.get('x-ratelimit-remaining')).toMatch(/^\d+$/);
      expect(await res.json()).toEqual({ code: 'gateway_timeout', message: expect.any(String), status: 504 });
    } finally {
      upstream.behaviour = echo;
    }
  });

  it('does not turn upstream keep-alive closes into 502s', async () => {
    // The upstream closes idle keep-alive sockets after 100 ms; the gateway must not reuse them.
    const short = await new EchoUpstream().start();
    short.server.keepAliveTimeout = 100;
    const front = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: short.url });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) {
        statuses.push((await fetch(`${front.url}/v1/x`, { headers: bearer(key.key) })).status);
        await new Promise((r) => setTimeout(r, 150));
      }
      expect(statuses).toEqual([200, 200, 200, 200, 200, 200]);
    } finally {
      await front.process.stop();
      await short.stop();
    }
  });

  it('frees the upstream request when the client aborts, and leaks no sockets', async () => {
    const upstreamClosed: Array<Promise<void>> = [];
    upstream.behaviour = (req) => {
      upstreamClosed.push(new Promise((resolve) => req.socket.once('close', () => resolve())));
    };
    const before = openSockets(gateway.process.child.pid!);
    try {
      for (let i = 0; i < 20; i++) {
        const controller = new AbortController();
        const pending = fetch(`${gateway.url}/v1/slow`, { headers: bearer(key.key), signal: controller.signal }).catch(() => 'aborted');
        // Abort once the upstream holds the request (not after a fixed delay, which a loaded
        // machine can outrun: the gateway then rightly never sends it).
        await expect.poll(() => upstreamClosed.length, { timeout: 30_000 }).toBe(i + 1);
        controller.abort();
        expect(await pending).toBe('aborted');
      }
      // Every upstream request was torn down after its client went away.
      await expect.poll(() => upstreamClosed.length, { timeout: 30_000 }).toBe(20);
      await Promise.race([
        Promise.all(upstreamClosed),
        new Promise((_, no) => setTimeout(() => no(new Error('upstream requests still open')), 3000)),
      ]);
    } finally {
      upstream.behaviour = echo;
    }
    await expect.poll(() => openSockets(gateway.process.child.pid!), { timeout: 30_000 }).toBeLessThanOrEqual(before + 2);
    const log = await gateway.process.waitForLog('request', 60_000, (l) => l.aborted === true);
    expect(log.keyId).toBe(key.id);
  });
});

describe('graceful shutdown', () => {
  it('finishes in-flight requests on SIGTERM, refuses new ones, and exits 0', async () => {
    const slow = await new EchoUpstream().start();
    slow.behaviour = (_req, res) => setTimeout(() => res.end('{"done":true}'), 400);
    const front = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: slow.url });
    try {
      const inFlight = Array.from({ length: 20 }, () =>
        fetch(`${front.url}/v1/categories`, { headers: bearer(key.key) }).then(async (r) => [r.status, await r.text()] as const),
      );
      await expect.poll(() => slow.seen.length, { timeout: 30_000 }).toBe(20);
      front.process.child.kill('SIGTERM');
      const results = await Promise.all(inFlight);
      expect(results).toEqual(Array.from({ length: 20 }, () => [200, '{"done":true}']));
      expect(await front.process.wait()).toBe(0);
      await expect(
        new Promise((resolve, reject) => request(`${front.url}/v1/categories`).on('error', reject).on('response', resolve).end()),
      ).rejects.toThrow(/ECONNREFUSED/);
    } finally {
      await front.process.stop();
      await slow.stop();
    }
  });
});
