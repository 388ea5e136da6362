import type { IncomingMessage } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { startBackend, type RunningBackend } from '../../src/backend/start-backend.js';
import { loadSettings } from '../../src/config/settings.js';
import { createLogger } from '../../src/observability/log.js';
import { CONFIG_DIR } from '../helpers/processes.js';

// The verifyRequest hook (filled by the gateway-assertion work) can only be given in process.
const settings = loadSettings({ TOLLGATE_CONFIG_DIR: CONFIG_DIR, BACKEND_PORT: '0' });
const logger = createLogger('silent', 'backend-test');

describe('backend verifyRequest hook', () => {
  let backend: RunningBackend | undefined;
  afterEach(async () => {
    await backend?.close();
    backend = undefined;
  });

  it('answers every request with the code the hook returns, before routing', async () => {
    const seen: IncomingMessage[] = [];
    backend = await startBackend({
      settings,
      logger,
      verifyRequest: async (req) => {
        seen.push(req);
        return req.headers['x-test-assertion'] === 'good' ? null : 'invalid_gateway_assertion';
      },
    });
    for (const [method, path] of [
      ['GET', '/v1/categories'],
      ['POST', '/v1/categories'],
      ['GET', '/nowhere'],
    ]) {
      const res = await fetch(backend.url + path!, { method });
      expect(res.status).toBe(401);
      expect(await res.json()).toMatchObject({ code: 'invalid_gateway_assertion', status: 401 });
    }
    const allowed = await fetch(`${backend.url}/v1/categories`, { headers: { 'x-test-assertion': 'good' } });
    expect(allowed.status).toBe(200);
    expect(seen).toHaveLength(4);
  });

  it('answers GET and HEAD /healthz without asking the hook (health probes carry no assertion), and nothing more', async () => {
    let asked = 0;
    backend = await startBackend({
      settings,
      logger,
      verifyRequest: async () => {
        asked++;
        return 'invalid_gateway_assertion';
      },
    });
    const get = await fetch(`${backend.url}/healthz`);
    expect(get.status).toBe(200);
    expect(await get.json()).toEqual({ status: 'ok' });
    expect((await fetch(`${backend.url}/healthz`, { method: 'HEAD' })).status).toBe(200);
    expect(asked).toBe(0);
    // Only that path and those methods: the rest still needs the assertion.
    for (const [method, path] of [
      ['POST', '/healthz'],
      ['GET', '/healthz/x'],
      ['GET', '/healthz/'],
      ['GET', '/v1/categories'],
    ]) {
      const res = await fetch(backend.url + path!, { method });
      expect(res.status, `${method} ${path}`).toBe(401);
    }
    expect(asked).toBe(4);
  });

  it('answers 500 internal_error when the hook throws, and keeps serving', async () => {
    let calls = 0;
    backend = await startBackend({
      settings,
      logger,
      verifyRequest: async () => {
        if (calls++ === 0) throw new Error('verifier broke');
        return null;
      },
    });
    const broken = await fetch(`${backend.url}/v1/categories`);
    expect(broken.status).toBe(500);
    expect(await broken.json()).toMatchObject({ code: 'internal_error', status: 500 });
    expect((await fetch(`${backend.url}/v1/categories`)).status).toBe(200);
  });

  it('serves everything when no hook is given', async () => {
    backend = await startBackend({ settings, logger });
    expect((await fetch(`${backend.url}/v1/store/orders`)).status).toBe(200);
  });

  it('close() resolves even with an idle keep-alive connection open', async () => {
    backend = await startBackend({ settings, logger });
    await fetch(`${backend.url}/v1/categories`); // fetch keeps the socket alive
    const startedAt = Date.now();
    await backend.close();
    backend = undefined;
    expect(Date.now() - startedAt).toBeLessThan(2_000);
  });
});
