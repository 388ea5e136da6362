import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPS_TOKEN } from '../helpers/admin-client.js';
import { TollgateProcess } from '../helpers/processes.js';
import { bearer } from '../helpers/stack.js';

// The embedded store of `tollgate up` (no Redis) keeps the same usage rows, at GET /admin/v1/usage.

let up: TollgateProcess;
let gatewayUrl: string;
let adminUrl: string;
let key = '';

beforeAll(async () => {
  up = TollgateProcess.spawn(['up'], {
    GATEWAY_PORT: '0',
    ADMIN_PORT: '0',
    BACKEND_PORT: '0',
    REDIS_URL: undefined,
    TOLLGATE_ADMIN_TOKENS: `ops:${OPS_TOKEN}`,
  });
  gatewayUrl = await up.listening('gateway');
  adminUrl = await up.listening('admin');
  const deadline = Date.now() + 5000;
  while (!up.output().includes('Try:') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  key = /^ {2}free\s+(tg_\S+)$/m.exec(up.output())![1]!;
});

afterAll(async () => {
  expect(await up?.stop()).toBe(0);
});

describe('usage for invoicing on the embedded store', () => {
  it('counts admitted requests and their units per hour, and answers the export', async () => {
    for (let i = 0; i < 4; i++) expect((await fetch(`${gatewayUrl}/v1/categories`, { headers: bearer(key) })).status).toBe(200);
    const id = /^tg_([0-9a-z]{12})_/.exec(key)![1]!;
    const now = Date.now();
    const from = new Date(now - 2 * 3_600_000).toISOString().replace(/\.\d+Z$/, 'Z');
    const to = new Date(now + 2 * 3_600_000).toISOString().replace(/\.\d+Z$/, 'Z');
    const res = await fetch(`${adminUrl}/admin/v1/usage?from=${from}&to=${to}&by=hour&format=jsonl&consumer=${id}`, {
      headers: { authorization: `Bearer ${OPS_TOKEN}` },
    });
    expect(res.status).toBe(200);
    const rows = (await res.text())
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { consumer: string; admitted: number; units: number });
    expect(rows.reduce((sum, r) => sum + r.admitted, 0)).toBe(4);
    expect(rows.every((r) => r.consumer === id)).toBe(true);
  });
});
