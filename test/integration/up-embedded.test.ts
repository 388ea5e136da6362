import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TollgateProcess } from '../helpers/processes.js';
import { bearer } from '../helpers/stack.js';
import { inOneMinute } from '../helpers/windows.js';

// `npm start` = `tollgate up`: backend and gateway in one process on the embedded store, with one
// demo key per plan printed for a newcomer. No Redis anywhere.

let up: TollgateProcess;
let gatewayUrl: string;
const demoKeys = new Map<string, string>();

beforeAll(async () => {
  up = TollgateProcess.spawn(['up'], { GATEWAY_PORT: '0', ADMIN_PORT: '0', BACKEND_PORT: '0', REDIS_URL: undefined });
  gatewayUrl = await up.listening('gateway');
  const deadline = Date.now() + 5000;
  while (!up.output().includes('Try:') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  for (const match of up.output().matchAll(/^ {2}(\w+)\s+(tg_\S+)$/gm)) demoKeys.set(match[1]!, match[2]!);
});

afterAll(async () => {
  expect(await up?.stop()).toBe(0);
});

describe('tollgate up on the embedded store', () => {
  it('prints the gateway URL and one demo key per plan', () => {
    expect(up.output()).toMatch(/tollgate is up: gateway http:\/\/127\.0\.0\.1:\d+\/v1/);
    expect([...demoKeys.keys()].sort()).toEqual(['business', 'enterprise', 'free', 'pro']);
  });

  it('serves the category API through the gateway with a demo key', async () => {
    const key = demoKeys.get('free')!;
    const created = await fetch(`${gatewayUrl}/v1/categories`, {
      method: 'POST',
      headers: { ...bearer(key), 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Cat' }),
    });
    expect(created.status).toBe(201);
    const category = await created.json();
    expect(category).toEqual({ id: expect.any(Number), name: 'Cat' });
    const list = await fetch(`${gatewayUrl}/v1/categories`, { headers: bearer(key) });
    expect(list.status).toBe(200);
    expect(await list.json()).toContainEqual(category);
    expect(list.headers.get('x-ratelimit-limit')).toBe('60');

    const bad = await fetch(`${gatewayUrl}/v1/categories`, {
      method: 'POST',
      headers: { ...bearer(key), 'content-type': 'application/json' },
      body: '{}',
    });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ code: 'invalid_body', message: expect.stringContaining('name'), status: 400 });
  });

  it('counts the plan quota on the embedded store too (300/minute on pro)', () => {
    const key = demoKeys.get('pro')!;
    const business = demoKeys.get('business')!;
    // Use a second key so this test does not depend on the other test's consumption.
    expect(key).not.toBe(business);
    // The demo key's minute binds: counted from the first answer, within one minute.
    return inOneMinute(async () => {
      const remaining: number[] = [];
      for (let i = 0; i < 4; i++) {
        const res = await fetch(`${gatewayUrl}/v1/store/orders`, { headers: bearer(key) });
        expect(res.status).toBe(200);
        expect(res.headers.get('x-ratelimit-limit')).toBe('300');
        remaining.push(Number(res.headers.get('x-ratelimit-remaining')));
      }
      expect(remaining).toEqual([0, 1, 2, 3].map((i) => remaining[0]! - i));
    });
  });

  it('answers without a key with 401', async () => {
    const res = await fetch(`${gatewayUrl}/v1/categories`);
    expect(res.status).toBe(401);
    expect((await res.json()).code).toBe('missing_api_key');
  });
});
