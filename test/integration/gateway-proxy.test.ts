import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'node:http';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, configCopy, createKey, startBackend, startGateway, type CreatedKey, type GatewayHandle } from '../helpers/stack.js';

// What reaches the upstream, and how upstream failures reach the client.

let redis: TestRedis;
let upstream: EchoUpstream;
let gateway: GatewayHandle;
let key: CreatedKey;

beforeAll(async () => {
  redis = await TestRedis.start();
  upstream = await new EchoUpstream().start();
  // A short upstream timeout so the 504 case is quick.
  const config = configCopy({ 'gateway.yaml': (t) => t.replace('timeoutMs: 15000', 'timeoutMs: 500') });
  gateway = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: upstream.url, TOLLGATE_CONFIG_DIR: config });
  key = await createKey(redis, ['--plan', 'business']);
});

afterAll(async () => {
  await gateway?.process.stop();
  await upstream?.stop();
  await redis?.stop();
});

describe('proxying', () => {
  it('forwards method, path, query and body unchanged', async () => {
    const res = await fetch(`${gateway.url}/v1/categories?x=1&y=2`, {
      method: 'POST',
      headers: { ...bearer(key.key), 'content-type': 'application/json', 'x-custom': 'kept' },
      body: JSON.stringify({ name: 'Dog' }),
    });
    expect(res.status).toBe(200);
    const seen = upstream.seen.at(-1)!;
    expect(seen).toMatchObject({ method: 'POST', url: '/v1/categories?x=1&y=2', body: '{"name":"Dog"}' });
    expect(seen.headers['x-custom']).toBe('kept');
    expect(seen.headers['content-type']).toBe('application/json');
  });

  it('never forwards the client credentials or client-sent identity headers, and names the consumer', async () => {
    await fetch(`${gateway.url}/v1/categories`, {
      headers: {
        ...bearer(key.key),
        'x-tollgate-consumer-id': 'someone-else',
        'x-tollgate-plan': 'enterprise',
        'x-consumer-id': 'spoofed',
        'proxy-authorization': 'Basic abc',
      },
    });
    const headers = upstream.seen.at(-1)!.headers;
    expect(headers.authorization).toBeUndefined();
    expect(headers['proxy-authorization']).toBeUndefined();
    expect(headers['x-consumer-id']).toBeUndefined();
    expect(headers['x-tollgate-consumer-id']).toBe(key.id);
    expect(headers['x-tollgate-plan']).toBe('business');
    expect(JSON.stringify(headers)).not.toContain(key.key);
  });

  it('strips hop-by-hop headers, including those named in Connection', async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(`${gateway.url}/v1/categories`, {
        headers: { ...bearer(key.key), connection: 'keep-alive, x-drop-me', 'x-drop-me': '1', 'keep-alive': 'timeout=5', te: 'trailers' },
      });
      req.on('response', (res) => {
        res.resume();
        resolve(res.statusCode!);
      });
      req.on('error', reject);
      req.end();
    });
    expect(status).toBe(200);
    const headers = upstream.seen.at(-1)!.headers;
    expect(headers['x-drop-me']).toBeUndefined();
    expect(headers['keep-alive']).toBeUndefined();
    expect(headers.te).toBeUndefined();
  });

  it('passes upstream statuses and bodies through', async () => {
    upstream.behaviour = (_req, res) => {
      res.statusCode = 418;
      res.setHeader('content-type', 'application/json');
      res.end('{"teapot":true}');
    };
    try {
      const res = await fetch(`${gateway.url}/v1/categories`, { headers: bearer(key.key) });
      expect(res.status).toBe(418);
      expect(await res.json()).toEqual({ teapot: true });
    } finally {
      upstream.behaviour = new EchoUpstream().behaviour;
    }
  });

  it('answers 504 gateway_timeout when the upstream is too slow', async () => {
    upstream.behaviour = (_req, res) => setTimeout(() => res.end('late'), 2000);
    try {
      const res = await fetch(`${gateway.url}/v1/categories`, { headers: bearer(key.key) });
      expect(res.status).toBe(504);
      expect(await res.json()).toEqual({ code: 'gateway_timeout', message: expect.any(String), status: 504 });
      expect(res.headers.get('x-request-id')).toBeTruthy();
    } finally {
      upstream.behaviour = new EchoUpstream().behaviour;
    }
  });

  it('answers 502 bad_gateway when the upstream resets the connection', async () => {
    upstream.behaviour = (req) => req.socket.destroy();
    try {
      const res = await fetch(`${gateway.url}/v1/categories`, { headers: bearer(key.key) });
      expect(res.status).toBe(502);
      expect(await res.json()).toEqual({ code: 'bad_gateway', message: expect.any(String), status: 502 });
    } finally {
      upstream.behaviour = new EchoUpstream().behaviour;
    }
  });
});

describe('in front of the real category backend', () => {
  it('creates and lists categories through the gateway, and answers 502 once the backend is stopped', async () => {
    const backend = await startBackend({ REDIS_URL: redis.url });
    const front = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: backend.url });
    try {
      const created = await fetch(`${front.url}/v1/categories`, {
        method: 'POST',
        headers: { ...bearer(key.key), 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'Rabbit', description: 'long ears' }),
      });
      expect(created.status).toBe(201);
      const category = await created.json();
      expect(category).toMatchObject({ id: expect.any(Number), name: 'Rabbit', description: 'long ears' });
      const list = await fetch(`${front.url}/v1/categories`, { headers: bearer(key.key) });
      expect(await list.json()).toContainEqual(category);

      await backend.process.stop();
      const down = await fetch(`${front.url}/v1/categories`, { headers: bearer(key.key) });
      expect(down.status).toBe(502);
      expect(await down.json()).toEqual({ code: 'bad_gateway', message: expect.any(String), status: 502 });
    } finally {
      await front.process.stop();
      await backend.process.stop();
    }
  });
});
