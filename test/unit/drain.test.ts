import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { Drain } from '../../src/http/drain.js';

// The drain's part in each response: Connection: close once it began, on plain requests and on
// `Expect: 100-continue` ones alike; nothing before.

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
});

async function serve(drain: Drain, withContinue: boolean): Promise<string> {
  server = createServer((_req, res) => res.end('ok'));
  if (withContinue)
    server.on('checkContinue', (req, res) => {
      res.writeContinue();
      req.resume();
      req.on('end', () => res.end('ok'));
    });
  drain.attach(server);
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function connectionHeader(url: string, headers: Record<string, string> = {}): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers: { connection: 'keep-alive', ...headers } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.headers.connection));
    });
    req.on('error', reject);
    req.on('continue', () => req.end('body'));
    if (!headers.expect) req.end('body');
  });
}

it('keeps connections alive until the drain begins, then closes each after its response', async () => {
  const drain = new Drain(0);
  const url = await serve(drain, false);
  expect(await connectionHeader(url)).toBe('keep-alive');
  await drain.begin();
  expect(drain.active).toBe(true);
  expect(await connectionHeader(url)).toBe('close');
});

it('marks Expect: 100-continue requests too, where the server handles them', async () => {
  const drain = new Drain(0);
  const url = await serve(drain, true);
  expect(await connectionHeader(url, { expect: '100-continue' })).toBe('keep-alive');
  await drain.begin();
  expect(await connectionHeader(url, { expect: '100-continue' })).toBe('close');
});

it('resolves begin() once the delay is over, and again at once for a second caller', async () => {
  const drain = new Drain(50);
  let done = false;
  const first = drain.begin().then(() => (done = true));
  expect(drain.active).toBe(true);
  expect(done).toBe(false);
  await first;
  await drain.begin();
  expect(done).toBe(true);
});
