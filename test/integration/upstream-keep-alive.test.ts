import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestRedis } from '../helpers/redis-server.js';
import { createKey, startGateway, type CreatedKey, type GatewayHandle } from '../helpers/stack.js';

// Kept-alive upstream connections are reused for the timeout the upstream announces, less a
// margin that never reaches zero (src/upstream/connection-pool.ts). Regression: with a 5 s margin,
// Node's default `Keep-Alive: timeout=5` left 0 and every request opened a new connection.

interface CountingServer {
  server: Server;
  url: string;
  connections: number;
}

async function countingServer(keepAliveTimeoutMs?: number): Promise<CountingServer> {
  const counting: CountingServer = { server: createServer(), url: '', connections: 0 };
  counting.server.on('request', (_req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end('{"ok":true}');
  });
  counting.server.on('connection', () => counting.connections++);
  // Node's own default (5 s) when not given: the server as most users run it.
  if (keepAliveTimeoutMs !== undefined) counting.server.keepAliveTimeout = keepAliveTimeoutMs;
  await new Promise<void>((resolve) => counting.server.listen(0, '127.0.0.1', resolve));
  counting.url = `http://127.0.0.1:${(counting.server.address() as AddressInfo).port}`;
  return counting;
}

let redis: TestRedis;
let key: CreatedKey;
const started: Array<{ gateway: GatewayHandle; upstream: CountingServer }> = [];

beforeAll(async () => {
  redis = await TestRedis.start();
  key = await createKey(redis, ['--plan', 'enterprise']);
});

afterAll(async () => {
  for (const { gateway, upstream } of started) {
    await gateway.process.stop();
    upstream.server.closeAllConnections();
    upstream.server.close();
  }
  await redis?.stop();
});

async function gatewayInFrontOf(upstream: CountingServer): Promise<GatewayHandle> {
  const gateway = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: upstream.url });
  started.push({ gateway, upstream });
  return gateway;
}

async function sequentialGets(gateway: GatewayHandle, count: number): Promise<number[]> {
  const client = new Client(gateway.url, { pipelining: 1 });
  const statuses: number[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const res = await client.request({ method: 'GET', path: `/v1/items/${i}`, headers: { authorization: `Bearer ${key.key}` } });
      await res.body.dump();
      statuses.push(res.statusCode);
    }
  } finally {
    await client.close();
  }
  return statuses;
}

describe('upstream keep-alive', () => {
  it('200 sequential requests to a Node server with its defaults (Keep-Alive: timeout=5) open a handful of connections', async () => {
    const upstream = await countingServer();
    const gateway = await gatewayInFrontOf(upstream);
    const statuses = await sequentialGets(gateway, 200);
    expect(statuses.every((s) => s === 200)).toBe(true);
    expect(upstream.connections).toBeLessThanOrEqual(3);
  });

  it('a server announcing a 2 s keep-alive is reused too', async () => {
    const upstream = await countingServer(2000);
    const gateway = await gatewayInFrontOf(upstream);
    const statuses = await sequentialGets(gateway, 200);
    expect(statuses.every((s) => s === 200)).toBe(true);
    expect(upstream.connections).toBeLessThanOrEqual(3);
  });
});
