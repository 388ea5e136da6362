import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import NodeWebSocket from 'ws';
import { chromiumMissing, launchChromium, type Chromium } from '../helpers/chromium.js';
import { describeNeeding } from '../helpers/needs-tool.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, configCopy, createKey, slackRedisTimeout, startGateway, type CreatedKey, type GatewayHandle } from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/ws-echo-upstream.js';

// CORS and WebSocket tickets in a real browser (Debian's Chromium, driven by playwright-core):
// pages served from other origins than the gateway's (http://localhost:<port> against
// http://127.0.0.1:<gateway port>) call the API with a key, read what the gateway adds, are
// blocked when their origin is not allowed, and open a WebSocket with a single-use ticket.

/** A page server: one blank page, so that scripts run with this server's origin. */
async function pageServer(): Promise<{ server: Server; origin: string }> {
  const server = createServer((_req, res) => {
    res.setHeader('content-type', 'text/html; charset=utf-8');
    res.end('<!doctype html><html lang="en"><title>app</title><p>app</p></html>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://localhost:${(server.address() as AddressInfo).port}` };
}

describeNeeding(chromiumMissing, 'CORS and WebSocket tickets in Chromium', () => {
  let redis: TestRedis;
  let upstream: EchoUpstream;
  let gateway: GatewayHandle;
  let browser: Chromium;
  let app: { server: Server; origin: string };
  let stranger: { server: Server; origin: string };
  let appPage: Page;
  let strangerPage: Page;
  let key: CreatedKey;

  beforeAll(async () => {
    redis = await TestRedis.start();
    upstream = await startEchoUpstream();
    [app, stranger] = await Promise.all([pageServer(), pageServer()]);
    const configDir = configCopy({
      'gateway.yaml': (t) => `${slackRedisTimeout(t)}\ncors:\n  origins: ["${app.origin}"]\n  headers: [authorization, content-type]\n`,
    });
    gateway = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: upstream.url, TOLLGATE_CONFIG_DIR: configDir });
    key = await createKey(redis, ['--plan', 'free', '--per-minute', '4', '--per-day', '4']);
    browser = await launchChromium();
    // The key's day is as small as its minute: its counts change only at midnight.
    await awayFromDayEdge();
    appPage = browser.page;
    await appPage.goto(`${app.origin}/`);
    strangerPage = await browser.context.newPage();
    await strangerPage.goto(`${stranger.origin}/`);
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await gateway?.process.stop();
    await upstream?.close();
    for (const page of [app, stranger]) {
      page?.server.closeAllConnections();
      await new Promise((resolve) => page?.server.close(resolve));
    }
    await redis?.stop();
  });

  /** fetch() in the page: status, the headers a script can read, the body; or how it was rejected. */
  const pageFetch = (page: Page, url: string, init: { method?: string; headers?: Record<string, string> } = {}) =>
    page.evaluate(
      async ({ url, init }) => {
        try {
          const res = await fetch(url, init);
          const pick = (name: string) => res.headers.get(name);
          return {
            status: res.status,
            remaining: pick('x-ratelimit-remaining'),
            retryAfter: pick('retry-after'),
            requestId: pick('x-request-id'),
            body: await res.text(),
          };
        } catch (err) {
          return { rejected: String(err) };
        }
      },
      { url, init },
    );

  it('a page from an allowed origin calls the API with a key and reads X-RateLimit-Remaining; preflights cost no quota', async () => {
    // Authorization makes each of these a preflighted request; two paths, two preflights.
    const first = await pageFetch(appPage, `${gateway.url}/v1/categories`, { headers: bearer(key.key) });
    expect(first).toMatchObject({ status: 200, remaining: '3' });
    expect(first.requestId).toBeTruthy();
    const second = await pageFetch(appPage, `${gateway.url}/v1/pets`, { headers: bearer(key.key) });
    expect(second).toMatchObject({ status: 200, remaining: '2' });
    // What the key has used, asked without a browser: exactly the two requests.
    const usage = await fetch(`${gateway.url}/v1/usage`, { headers: bearer(key.key) });
    expect(usage.headers.get('x-ratelimit-remaining')).toBe('2');
  });

  it('reads a 429’s Retry-After and Error body', async () => {
    let last: any;
    for (let i = 0; i < 4 && last?.status !== 429; i++)
      last = await pageFetch(appPage, `${gateway.url}/v1/categories`, { headers: bearer(key.key) });
    expect(last.status).toBe(429);
    expect(Number(last.retryAfter)).toBeGreaterThan(0);
    expect(JSON.parse(last.body)).toMatchObject({ code: 'rate_limit_exceeded', status: 429 });
  });

  it('reads a 401’s Error body', async () => {
    const res = await pageFetch(appPage, `${gateway.url}/v1/categories`, { headers: { authorization: 'Bearer not-a-key' } });
    expect(res.status).toBe(401);
    expect(JSON.parse((res as any).body)).toMatchObject({ code: 'malformed_api_key', status: 401 });
  });

  it('a page from an origin not allowed is blocked: its fetch rejects', async () => {
    const res = await pageFetch(strangerPage, `${gateway.url}/v1/categories`, { headers: bearer(key.key) });
    expect(res).toMatchObject({ rejected: expect.stringContaining('TypeError') });
  });

  it('a page opens a WebSocket with a ticket, and the same ticket fails the second time', async () => {
    const fresh = await createKey(redis, ['--plan', 'free']);
    const result = await appPage.evaluate(
      async ({ gatewayUrl, apiKey }) => {
        const minted = await fetch(`${gatewayUrl}/v1/ws-tickets`, { method: 'POST', headers: { authorization: `Bearer ${apiKey}` } });
        const { ticket } = (await minted.json()) as { ticket: string };
        const socketUrl = `${gatewayUrl.replace(/^http/, 'ws')}/v1/live?ticket=${encodeURIComponent(ticket)}`;
        const attempt = (url: string, protocols?: string[]) =>
          new Promise<string>((resolve) => {
            const ws = new WebSocket(url, protocols);
            ws.onopen = () => ws.send('hello');
            ws.onmessage = (event) => {
              resolve(`message:${String(event.data)}`);
              ws.close();
            };
            ws.onerror = () => resolve('error');
          });
        const first = await attempt(socketUrl);
        const second = await attempt(socketUrl);
        // The subprotocol form, with a new ticket.
        const again = (await (
          await fetch(`${gatewayUrl}/v1/ws-tickets`, { method: 'POST', headers: { authorization: `Bearer ${apiKey}` } })
        ).json()) as {
          ticket: string;
        };
        const byProtocol = await attempt(`${gatewayUrl.replace(/^http/, 'ws')}/v1/live`, [`tollgate.ticket.${again.ticket}`]);
        return { status: minted.status, first, second, byProtocol };
      },
      { gatewayUrl: gateway.url, apiKey: fresh.key },
    );
    expect(result).toEqual({ status: 201, first: 'message:echo:hello', second: 'error', byProtocol: 'message:echo:hello' });
  });

  it('a page from an origin not allowed cannot open a WebSocket even with a ticket', async () => {
    const fresh = await createKey(redis, ['--plan', 'free']);
    const minted = await fetch(`${gateway.url}/v1/ws-tickets`, { method: 'POST', headers: bearer(fresh.key) });
    const { ticket } = (await minted.json()) as { ticket: string };
    const outcome = await strangerPage.evaluate(
      (url) =>
        new Promise<string>((resolve) => {
          const ws = new WebSocket(url);
          ws.onopen = () => resolve('open');
          ws.onerror = () => resolve('error');
        }),
      `${gateway.url.replace(/^http/, 'ws')}/v1/live?ticket=${ticket}`,
    );
    expect(outcome).toBe('error');
    // Refused for its origin, before the ticket was looked at: a client without a page can still use it.
    const ws = new NodeWebSocket(`${gateway.url.replace(/^http/, 'ws')}/v1/live?ticket=${ticket}`);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    ws.close();
  });
});
