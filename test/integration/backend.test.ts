import http from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gatewayIdentity } from '../helpers/assertion.js';
import { TollgateProcess } from '../helpers/processes.js';
import { TestRedis } from '../helpers/redis-server.js';

// The category backend as it runs in production: `tollgate backend` as its own process, on a real
// redis-server of the test's own, spoken to over HTTP. maxBodyBytes is the shipped 65536. The
// backend answers only requests with a valid gateway assertion, so every request here carries one,
// signed with the secret the test processes share (gateway-assertion.test.ts covers refusals).
const MAX_BODY_BYTES = 65_536;
const CATEGORIES_KEY = '{tg:categories}:items';

interface Answer {
  status: number;
  headers: Headers;
  body: any;
}

async function call(
  url: string,
  method: string,
  path: string,
  body?: string | Buffer,
  headers: Record<string, string> = {},
): Promise<Answer> {
  const identity = await gatewayIdentity();
  const res = await fetch(url + path, {
    method,
    headers: body === undefined ? { ...identity, ...headers } : { 'content-type': 'application/json', ...identity, ...headers },
    body: typeof body === 'string' || body === undefined ? body : new Uint8Array(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text === '' ? undefined : JSON.parse(text) };
}

const post = (url: string, body: unknown, headers?: Record<string, string>) =>
  call(url, 'POST', '/v1/categories', typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body), headers);
const list = async (url: string) =>
  (await call(url, 'GET', '/v1/categories')).body as Array<{ id: number; name: string; description?: string }>;

/** Sends bytes as they are (for requests fetch refuses to make) and returns the raw response. */
function rawHttp(url: string, request: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    let response = '';
    socket.on('data', (d) => (response += d));
    socket.on('end', () => resolve(response));
    socket.on('error', reject);
    socket.end(request);
  });
}

/** A chunked POST (no Content-Length) of `totalBytes`, so the limit must be enforced while streaming. */
async function postChunked(url: string, totalBytes: number): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: any }> {
  const identity = await gatewayIdentity();
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${url}/v1/categories`,
      { method: 'POST', headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked', ...identity } },
      (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: JSON.parse(text) }));
      },
    );
    // The server stops reading at the limit and closes; our unsent chunks then fail to write.
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE' && err.code !== 'ECONNRESET') reject(err);
    });
    const chunk = Buffer.alloc(16_384, ' ');
    let sentBytes = 0;
    const pump = () => {
      while (sentBytes < totalBytes) {
        sentBytes += chunk.length;
        if (!req.write(chunk)) return void req.once('drain', pump);
      }
      req.end();
    };
    req.write('{"name": "big", "description": "');
    pump();
  });
}

/** A chunked POST that never ends on its own: resolves once the server cuts the connection. */
async function postForever(url: string): Promise<{ sentBytes: number; outcome: string }> {
  const identity = await gatewayIdentity();
  return new Promise((resolve) => {
    let sentBytes = 0;
    let done = false;
    const finish = (outcome: string) => {
      if (done) return;
      done = true;
      resolve({ sentBytes, outcome });
    };
    const req = http.request(`${url}/v1/categories`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked', ...identity },
    });
    req.on('response', (res) => res.resume().on('close', () => finish('closed')));
    req.on('error', (err: NodeJS.ErrnoException) => finish(err.code ?? err.message));
    req.on('close', () => finish('closed'));
    const chunk = Buffer.alloc(65_536, ' ');
    const pump = () => {
      while (!done && !req.destroyed) {
        sentBytes += chunk.length;
        if (!req.write(chunk)) return void req.once('drain', pump);
      }
    };
    pump();
  });
}

function expectError(answer: Answer, status: number, code: string, message?: RegExp) {
  expect(answer.status).toBe(status);
  expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
  expect(answer.body).toMatchObject({ code, status });
  expect(typeof answer.body.message).toBe('string');
  if (message) expect(answer.body.message).toMatch(message);
}

async function startBackendProcess(env: Record<string, string>): Promise<{ process: TollgateProcess; url: string }> {
  const process = TollgateProcess.spawn(['backend'], { BACKEND_PORT: '0', ...env });
  return { process, url: await process.listening('backend') };
}

describe('category backend on Redis (real process)', () => {
  let redis: TestRedis;
  let backend: TollgateProcess;
  let url: string;

  beforeAll(async () => {
    redis = await TestRedis.start();
    ({ process: backend, url } = await startBackendProcess({ REDIS_URL: redis.url }));
  });

  afterAll(async () => {
    await backend?.stop();
    await redis?.stop();
  });

  it('logs a url of the form http://127.0.0.1:PORT', () => {
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });

  it('creates a category: 201, a numeric id, a Location naming it, the name trimmed', async () => {
    const created = await post(url, { name: '  Dog ', description: '  Loyal friends ' });
    expect(created.status).toBe(201);
    expect(Number.isSafeInteger(created.body.id)).toBe(true);
    expect(created.body.id).toBeGreaterThanOrEqual(1);
    expect(created.headers.get('location')).toBe(`/v1/categories/${created.body.id}`);
    // Names are stored trimmed; descriptions as sent.
    expect(created.body).toEqual({ id: created.body.id, name: 'Dog', description: '  Loyal friends ' });
    expect(await list(url)).toContainEqual(created.body);
  });

  it('leaves description out when none was sent, and keeps an empty one', async () => {
    const bare = await post(url, { name: 'Cat' });
    expect(bare.status).toBe(201);
    expect(bare.body).toEqual({ id: bare.body.id, name: 'Cat' });
    expect(Object.hasOwn(bare.body, 'description')).toBe(false);
    const empty = await post(url, { name: 'Rabbit', description: '' });
    expect(empty.body).toEqual({ id: empty.body.id, name: 'Rabbit', description: '' });
  });

  it('ignores unknown fields and does not store them', async () => {
    const created = await post(url, { name: 'Fish', colour: 'gold', nested: { a: 1 } });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({ id: created.body.id, name: 'Fish' });
    expect((await list(url)).find((c) => c.id === created.body.id)).toEqual({ id: created.body.id, name: 'Fish' });
  });

  it('assigns consecutive ids and lists every category ordered numerically by id (10 after 9)', async () => {
    const before = await list(url);
    const ids: number[] = [];
    for (let i = 0; i < 12; i++) ids.push((await post(url, { name: `Breed ${i}` })).body.id);
    for (let i = 1; i < ids.length; i++) expect(ids[i]).toBe(ids[i - 1]! + 1);
    const after = await list(url);
    expect(after).toHaveLength(before.length + 12);
    expect(after.map((c) => c.id)).toEqual([...after.map((c) => c.id)].sort((a, b) => a - b));
    expect(after.some((c) => c.id >= 10)).toBe(true);
  });

  it('gives concurrent creations distinct, gap-free ids', async () => {
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => post(url, { name: `Parallel ${i}` })));
    expect(answers.every((a) => a.status === 201)).toBe(true);
    const ids = answers.map((a) => a.body.id as number).sort((a, b) => a - b);
    expect(new Set(ids).size).toBe(40);
    expect(ids[39]! - ids[0]!).toBe(39);
  });

  describe('refuses a bad body with 400 and a message naming the field', () => {
    const cases: Array<[string, string, string, RegExp]> = [
      ['no name', '{}', 'invalid_body', /^name is required$/],
      ['name a number', '{"name": 42}', 'invalid_body', /^name must be a non-empty string/],
      ['name null', '{"name": null}', 'invalid_body', /^name must be a non-empty string/],
      ['name an object', '{"name": {"en": "Dog"}}', 'invalid_body', /^name must be a non-empty string/],
      ['name empty', '{"name": ""}', 'invalid_body', /^name must be a non-empty string/],
      ['name only whitespace', '{"name": " \\t\\n "}', 'invalid_body', /^name must be a non-empty string/],
      ['description a number', '{"name": "Dog", "description": 5}', 'invalid_body', /^description must be a string/],
      ['description null', '{"name": "Dog", "description": null}', 'invalid_body', /^description must be a string/],
      ['an id', '{"id": 7, "name": "Dog"}', 'invalid_body', /^id is assigned by the service and must not be sent$/],
      ['an id of null', '{"id": null, "name": "Dog"}', 'invalid_body', /^id is assigned by the service/],
      ['an array', '[{"name": "Dog"}]', 'invalid_body', /JSON object/],
      ['null', 'null', 'invalid_body', /JSON object/],
      ['a number', '42', 'invalid_body', /JSON object/],
      ['a string', '"Dog"', 'invalid_body', /JSON object/],
      ['not JSON', 'name=Dog', 'invalid_json', /not valid JSON/],
      ['truncated JSON', '{"name": "Do', 'invalid_json', /not valid JSON/],
      ['empty', '', 'invalid_json', /empty/],
    ];
    for (const [label, body, code, message] of cases) {
      it(label, async () => {
        const countBefore = (await list(url)).length;
        expectError(await post(url, body), 400, code, message);
        expect(await list(url)).toHaveLength(countBefore);
      });
    }

    it('invalid UTF-8', async () => {
      expectError(
        await post(url, Buffer.from([0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d])),
        400,
        'invalid_json',
        /UTF-8/,
      );
    });
  });

  it('accepts application/json in any case, with a UTF-8 charset', async () => {
    for (const type of ['application/json', 'Application/JSON; Charset=UTF-8', 'application/json;charset="utf-8"']) {
      expect((await post(url, { name: 'Typed' }, { 'content-type': type })).status).toBe(201);
    }
  });

  it('refuses any other Content-Type with 415', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/jsonx', 'application/json; charset=latin1']) {
      expectError(await post(url, '{"name":"Dog"}', { 'content-type': type }), 415, 'unsupported_media_type');
    }
    const noType = await fetch(`${url}/v1/categories`, {
      method: 'POST',
      headers: await gatewayIdentity(),
      body: new Uint8Array(Buffer.from('{"name":"Dog"}')),
    });
    expect(noType.status).toBe(415);
    expect(await noType.json()).toMatchObject({ code: 'unsupported_media_type', status: 415 });
  });

  it('accepts a body of exactly maxBodyBytes', async () => {
    const skeleton = JSON.stringify({ name: 'Exact', description: '' });
    const body = JSON.stringify({ name: 'Exact', description: 'x'.repeat(MAX_BODY_BYTES - Buffer.byteLength(skeleton)) });
    expect(Buffer.byteLength(body)).toBe(MAX_BODY_BYTES);
    expect((await post(url, body)).status).toBe(201);
  });

  it('refuses a declared Content-Length over maxBodyBytes with 413 and closes the connection', async () => {
    const answer = await post(url, `{"name":"Big","description":"${'x'.repeat(MAX_BODY_BYTES)}"}`);
    expectError(answer, 413, 'payload_too_large', /65536 bytes/);
  });

  it('stops buffering a chunked body at maxBodyBytes and answers 413', async () => {
    const answer = await postChunked(url, 4 * 1024 * 1024);
    expect(answer.status).toBe(413);
    expect(answer.body).toMatchObject({ code: 'payload_too_large', status: 413 });
    expect((await call(url, 'GET', '/v1/categories')).status).toBe(200);
  });

  it('cuts off a client that keeps sending long after the 413', async () => {
    const { sentBytes, outcome } = await postForever(url);
    expect(outcome).toMatch(/^(ECONNRESET|EPIPE|closed)$/);
    // The server drops at most 8 MiB after the limit; the rest may sit in socket buffers.
    expect(sentBytes).toBeLessThan(64 * 1024 * 1024);
    expect((await call(url, 'GET', '/v1/categories')).status).toBe(200);
  });

  it('answers 404 not_found for unknown paths', async () => {
    for (const path of [
      '/',
      '/v1',
      '/categories',
      '/v1/categories/',
      '/v1/categories/1',
      '/v1/pets',
      '/v1/pets/1/toys',
      '/v2/categories',
    ]) {
      expectError(await call(url, 'GET', path), 404, 'not_found');
    }
  });

  it('answers 405 method_not_allowed with an Allow header for a wrong method on a known path', async () => {
    for (const [method, path, allow] of [
      ['PUT', '/v1/categories', 'GET, POST, HEAD'],
      ['DELETE', '/v1/categories', 'GET, POST, HEAD'],
      ['PATCH', '/v1/categories', 'GET, POST, HEAD'],
      ['POST', '/v1/pets/1', 'GET, HEAD'],
      ['DELETE', '/v1/store/orders', 'GET, HEAD'],
    ] as const) {
      const answer = await call(url, method, path);
      expectError(answer, 405, 'method_not_allowed');
      expect(answer.headers.get('allow')).toBe(allow);
    }
  });

  it('answers HEAD like GET without a body', async () => {
    const answer = await call(url, 'HEAD', '/v1/categories');
    expect(answer.status).toBe(200);
    expect(answer.body).toBeUndefined();
  });

  it('ignores query strings for routing', async () => {
    const listed = await call(url, 'GET', '/v1/categories?limit=1&offset=2');
    expect(listed.status).toBe(200);
    expect(listed.body).toEqual(await list(url));
    expect((await call(url, 'POST', '/v1/categories?dryRun=true', '{"name":"Queried"}')).status).toBe(201);
    expect((await call(url, 'GET', '/v1/store/orders?status=open')).body).toEqual([]);
  });

  it('answers the pet placeholder with the id as sent', async () => {
    for (const petId of ['42', '007', '123456789012345678']) {
      const answer = await call(url, 'GET', `/v1/pets/${petId}`);
      expect(answer.status).toBe(200);
      expect(answer.body).toEqual({
        id: petId,
        name: null,
        status: 'unavailable',
        note: 'pet records are not defined by the service interface',
      });
    }
  });

  it('refuses a petId that is not 1 to 18 digits with 400 bad_request', async () => {
    for (const petId of ['abc', '-1', '1.5', '1234567890123456789', '%31', '1e3']) {
      expectError(await call(url, 'GET', `/v1/pets/${petId}`), 400, 'bad_request', /petId/);
    }
  });

  it('answers the orders placeholder with an empty list', async () => {
    const answer = await call(url, 'GET', '/v1/store/orders');
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual([]);
  });

  it('answers malformed HTTP with a 400 Error body and keeps serving', async () => {
    const response = await rawHttp(url, 'GET /v1/categories HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n');
    expect(response).toMatch(/^HTTP\/1\.1 400 /);
    expect(response).toContain('"status":400');
    expect((await call(url, 'GET', '/v1/categories')).status).toBe(200);
  });

  it('answers a corrupt stored category with 500 internal_error, logs it, and keeps serving', async () => {
    const client = redis.client();
    try {
      await client.hset(CATEGORIES_KEY, '999999', 'not json');
      expectError(await call(url, 'GET', '/v1/categories'), 500, 'internal_error');
      await backend.waitForLog('request failed');
    } finally {
      await client.hdel(CATEGORIES_KEY, '999999');
      client.disconnect();
    }
    expect((await call(url, 'GET', '/v1/categories')).status).toBe(200);
  });

  it('logs one access line per request (method, path, status, ms) and never the Authorization header', async () => {
    const secret = 'tg_secretsecret_do_not_log_me';
    await call(url, 'GET', '/v1/store/orders?token=query-secret', undefined, { authorization: `Bearer ${secret}` });
    const line = await backend.waitForLog('request');
    expect(line).toMatchObject({
      method: expect.any(String),
      path: expect.any(String),
      status: expect.any(Number),
      ms: expect.any(Number),
    });
    await expect.poll(() => backend.logs().some((l) => l.msg === 'request' && l.path === '/v1/store/orders')).toBe(true);
    expect(backend.output()).not.toContain(secret);
    expect(backend.output()).not.toContain('query-secret');
  });
});

describe('category backend persistence and Redis failure (real process)', () => {
  let redis: TestRedis;
  const running: TollgateProcess[] = [];

  beforeAll(async () => {
    redis = await TestRedis.start();
  });

  afterAll(async () => {
    for (const p of running) await p.stop();
    await redis?.stop();
  });

  async function start() {
    const started = await startBackendProcess({ REDIS_URL: redis.url });
    running.push(started.process);
    return started;
  }

  it('keeps categories across a restart, and ids continue where they stopped', async () => {
    const first = await start();
    expect((await post(first.url, { name: 'Dog' })).body).toEqual({ id: 1, name: 'Dog' });
    expect((await post(first.url, { name: 'Cat', description: 'Independent' })).body).toEqual({
      id: 2,
      name: 'Cat',
      description: 'Independent',
    });
    expect(await first.process.stop()).toBe(0);

    const second = await start();
    expect(await list(second.url)).toEqual([
      { id: 1, name: 'Dog' },
      { id: 2, name: 'Cat', description: 'Independent' },
    ]);
    const third = await post(second.url, { name: 'Rabbit' });
    expect(third.body).toEqual({ id: 3, name: 'Rabbit' });
    expect(third.headers.get('location')).toBe('/v1/categories/3');
    await second.process.stop();
  });

  it('loses no acknowledged category when the backend crashes (SIGKILL)', async () => {
    const first = await start();
    const before = (await list(first.url)).length;
    const created = await post(first.url, { name: 'Hamster' });
    expect(created.status).toBe(201);
    expect(await first.process.stop('SIGKILL')).not.toBe(0);
    const second = await start();
    const after = await list(second.url);
    expect(after).toHaveLength(before + 1);
    expect(after).toContainEqual(created.body);
    await second.process.stop();
  });

  it('answers 503 service_unavailable while Redis is down and recovers on its own', async () => {
    const { process, url } = await start();
    await redis.kill();
    try {
      expectError(await call(url, 'GET', '/v1/categories'), 503, 'service_unavailable');
      expectError(await post(url, { name: 'Dog' }), 503, 'service_unavailable');
      // Routes that do not touch the store are unaffected.
      expect((await call(url, 'GET', '/v1/store/orders')).status).toBe(200);
    } finally {
      await redis.launch();
    }
    await expect.poll(async () => (await call(url, 'GET', '/v1/categories')).status, { timeout: 30_000, interval: 100 }).toBe(200);
    expect((await post(url, { name: 'Back' })).status).toBe(201);
    expect(process.output()).not.toMatch(/Unhandled error event/);
    await process.stop();
  });
});

describe('category backend started while Redis is down (real process)', () => {
  it('starts anyway, answers 503 for categories, and recovers when Redis comes up', async () => {
    const redis = await TestRedis.start();
    await redis.kill();
    const backend = await startBackendProcess({ REDIS_URL: redis.url });
    try {
      await backend.process.waitForLog(/not reachable at startup/);
      expectError(await call(backend.url, 'GET', '/v1/categories'), 503, 'service_unavailable');
      await redis.launch();
      await expect
        .poll(async () => (await call(backend.url, 'GET', '/v1/categories')).status, { timeout: 30_000, interval: 100 })
        .toBe(200);
      await backend.process.waitForLog(/category store \(Redis\) connected/);
    } finally {
      await backend.process.stop();
      await redis.stop();
    }
  });
});

describe('category backend without REDIS_URL (real process, memory)', () => {
  it('keeps categories in memory, ids from 1, gone after a restart', async () => {
    const first = await startBackendProcess({});
    try {
      await first.process.waitForLog(/categories kept in memory/);
      expect((await post(first.url, { name: 'Dog' })).body).toEqual({ id: 1, name: 'Dog' });
      expect((await post(first.url, { name: 'Cat' })).body).toEqual({ id: 2, name: 'Cat' });
      expect(await list(first.url)).toEqual([
        { id: 1, name: 'Dog' },
        { id: 2, name: 'Cat' },
      ]);
      expectError(await post(first.url, { name: ' ' }), 400, 'invalid_body', /name/);
    } finally {
      await first.process.stop();
    }
    const second = await startBackendProcess({});
    try {
      expect(await list(second.url)).toEqual([]);
    } finally {
      await second.process.stop();
    }
  });
});
