import { Agent, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { describeNeeding } from '../helpers/needs-tool.js';
import { nginxBinary, TestNginx } from '../helpers/nginx.js';
import { freePort } from '../helpers/ports.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, configCopy, createKey, slackRedisTimeout, startBackend, startGateway, type GatewayHandle } from '../helpers/stack.js';
import type { TollgateProcess } from '../helpers/processes.js';

// What deploy/kubernetes/ relies on, against real processes: the liveness probe (/healthz) stays
// 200 whatever Redis and the upstream do; after SIGTERM the gateway drains (keeps serving,
// /readyz 503, Connection: close) for gateway.drainDelaySeconds, then closes and exits 0; and a
// client sending without pause through a load balancer that stops routing to the stopping replica
// (nginx reloaded, as an ingress or kube-proxy drops a pod from the endpoints) sees no failure.

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

function get(url: string, agent?: Agent, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { agent, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

function post(url: string, body: string, headers: Record<string, string>): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: 'POST', agent: false, headers: { ...headers, 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const running: TollgateProcess[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => p.stop('SIGKILL')));
});

describe('liveness and readiness', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await TestRedis.start();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it('opens two Redis connections per gateway and one per backend (docs/kubernetes.md sizes Redis by it)', async () => {
    const gateway = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: `http://127.0.0.1:${await freePort()}` });
    running.push(gateway.process);
    const backend = await startBackend({ REDIS_URL: redis.url });
    running.push(backend.process);
    const client = redis.client();
    try {
      const names = async () =>
        ((await client.call('CLIENT', 'LIST')) as string)
          .split('\n')
          .map((line) => /\bname=(\S*)/.exec(line)?.[1])
          .filter((name) => name?.startsWith('tollgate-'))
          .sort();
      // The subscriber connects right after the command connection: wait for it.
      await expect.poll(names, { timeout: 10_000 }).toEqual(['tollgate-backend', 'tollgate-gateway', 'tollgate-subscriber']);
    } finally {
      client.disconnect();
    }
  }, 60_000);

  it('keeps /healthz at 200 while Redis is stopped and the upstream is down; /readyz says degraded (local mode)', async () => {
    const deadUpstream = `http://127.0.0.1:${await freePort()}`;
    const gateway = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: deadUpstream });
    running.push(gateway.process);
    expect((await get(`${gateway.adminUrl}/healthz`)).status).toBe(200);

    await redis.kill();
    try {
      // Readiness notices (a failed PING) but stays 200: the shipped `local` failure mode serves
      // without Redis, and every replica shares it (503 would empty the Service). Liveness must
      // not notice either: a restart would not bring Redis back.
      const readyBody = async () => JSON.parse((await get(`${gateway.adminUrl}/readyz`)).body) as { status: string };
      await expect.poll(async () => (await readyBody()).status, { timeout: 10_000 }).toBe('degraded');
      const ready = await get(`${gateway.adminUrl}/readyz`);
      expect(ready.status).toBe(200);
      expect((JSON.parse(ready.body) as { checks: Record<string, boolean> }).checks.redis).toBe(false);
      for (let i = 0; i < 5; i++) {
        const live = await get(`${gateway.adminUrl}/healthz`);
        expect(live.status).toBe(200);
        expect(JSON.parse(live.body)).toEqual({ status: 'ok' });
      }
    } finally {
      await redis.launch();
    }
    await expect.poll(async () => (await get(`${gateway.adminUrl}/readyz`)).status, { timeout: 10_000 }).toBe(200);
  }, 60_000);
});

describe('drain after SIGTERM', () => {
  it('keeps serving with Connection: close and /readyz 503 for drainDelaySeconds, then exits 0', async () => {
    const gateway = await startGateway({ DRAIN_DELAY_SECONDS: '8', UPSTREAM_URL: `http://127.0.0.1:${await freePort()}` });
    running.push(gateway.process);
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const openapi = `${gateway.url}/v1/openapi.json`;
    const before = await get(openapi, agent);
    expect(before.status).toBe(200);
    expect(before.headers.connection).toBe('keep-alive');
    expect((await get(`${gateway.adminUrl}/readyz`)).status).toBe(200);

    gateway.process.child.kill('SIGTERM');
    await gateway.process.waitForLog('draining');

    const readiness = await get(`${gateway.adminUrl}/readyz`);
    expect(readiness.status).toBe(503);
    expect(JSON.parse(readiness.body)).toMatchObject({ status: 'draining' });
    expect((await get(`${gateway.adminUrl}/healthz`)).status).toBe(200);
    // On the kept-alive connection, and on a new one: served, each told to go elsewhere next time.
    for (const answer of [await get(openapi, agent), await get(openapi)]) {
      expect(answer.status).toBe(200);
      expect(answer.headers.connection).toBe('close');
    }
    expect(await gateway.process.wait()).toBe(0);
    const order = gateway.process.logs().map((l) => l.msg);
    expect(order.indexOf('draining')).toBeLessThan(order.indexOf('stopped'));
    agent.destroy();
  }, 60_000);
});

const nginxPath = nginxBinary();

describeNeeding(
  nginxPath ? undefined : 'nginx is not installed (apt-get install nginx)',
  'rolling a replica behind a load balancer',
  () => {
    let redis: TestRedis;
    let backend: { process: TollgateProcess; url: string };
    let configDir: string;

    beforeAll(async () => {
      redis = await TestRedis.start();
      configDir = configCopy({ 'gateway.yaml': slackRedisTimeout });
      backend = await startBackend({ REDIS_URL: redis.url, TOLLGATE_CONFIG_DIR: configDir });
    }, 60_000);
    afterAll(async () => {
      await backend?.process.stop();
      await redis?.stop();
    });

    it('loses no request from a client sending without pause while one of two gateways stops', async () => {
      const env = {
        REDIS_URL: redis.url,
        TOLLGATE_CONFIG_DIR: configDir,
        UPSTREAM_URL: backend.url,
        TRUST_PROXY_HOPS: '1',
        QUOTA_REPLICAS: '2',
        // Long enough for nginx's reload below on a loaded machine; Kubernetes needs a few seconds.
        DRAIN_DELAY_SECONDS: '5',
      };
      const [stopping, staying] = await Promise.all([startGateway(env), startGateway(env)]);
      running.push(stopping.process, staying.process);
      // Without retries, as kube-proxy: nginx's own retry on another replica would hide a refused
      // connection or a kept-alive one closed under a request, which is what the drain must avoid.
      const lb = await TestNginx.start(
        nginxPath!,
        [stopping, staying].map((g) => new URL(g.url).host),
        { retries: false },
      );
      try {
        const key = await createKey(redis, ['--plan', 'enterprise', '--per-minute', '1000000', '--per-day', '100000000'], configDir);
        const failures: string[] = [];
        let sent = 0;
        let sending = true;
        // A new connection per request (Connection: close): nginx's reload closes the idle client
        // connections of its old workers, a race between nginx and its clients that is no part of
        // what is tested here (the gateway's side, behind nginx, on kept-alive upstream connections).
        const client = async () => {
          while (sending) {
            sent++;
            try {
              const res = await post(`${lb.url}/v1/categories`, JSON.stringify({ name: `c${sent}` }), bearer(key.key));
              if (res.status !== 201) failures.push(`${res.status} ${res.body}`);
            } catch (err) {
              failures.push(String(err));
            }
          }
        };
        const servedBy = (g: GatewayHandle) => g.process.logs().filter((l) => l.msg === 'request').length;
        const clients = Array.from({ length: 4 }, client);
        // Both replicas take traffic before the stop.
        await expect.poll(() => Math.min(servedBy(stopping), servedBy(staying)), { timeout: 15_000 }).toBeGreaterThan(5);

        stopping.process.child.kill('SIGTERM');
        await stopping.process.waitForLog('draining');
        // The stopping replica keeps serving after SIGTERM, while the balancer still sends to it...
        const atDrain = servedBy(stopping);
        await expect.poll(() => servedBy(stopping), { timeout: 4000 }).toBeGreaterThan(atDrain);
        // ...until the balancer stops routing to it, within the drain delay.
        lb.reconfigure([new URL(staying.url).host]);
        expect(await stopping.process.wait()).toBe(0);
        const afterExit = servedBy(staying);
        await expect.poll(() => servedBy(staying), { timeout: 10_000 }).toBeGreaterThan(afterExit + 20);
        sending = false;
        await Promise.all(clients);

        expect(failures).toEqual([]);
        expect(sent).toBeGreaterThan(50);
      } finally {
        await lb.stop();
      }
    }, 90_000);
  },
);
