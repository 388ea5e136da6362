import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { EdgeStack } from '../helpers/edge-stack.js';
import { residentBytes } from '../helpers/open-sockets.js';
import { headerOf } from '../helpers/raw-client.js';

// The forwarder on undici's pool (src/gateway/proxy.ts), attacked where undici behaves unlike
// node:http's ClientRequest: who owns the client's request stream once undici streams it, what
// the pool does with queued and aborted requests, backpressure both ways, and how a response head
// undici hands over as raw bytes becomes the client's.

/**
 * The gateway's upstream: by default a byte pipe to the stack's RecordingUpstream (so sentinels and
 * recorded requests work as in the other edge tests); a test that needs to act on a request while
 * its body is still arriving sets `script` and gets each new upstream connection itself.
 */
class ScriptedUpstream {
  script?: (socket: Socket) => void;
  readonly sockets = new Set<Socket>();
  private server!: Server;
  url = '';

  constructor(private readonly target: () => string) {}

  async start(): Promise<this> {
    this.server = createServer((socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
      socket.on('error', () => socket.destroy());
      if (this.script) return this.script(socket);
      const { hostname, port } = new URL(this.target());
      const peer = connect(Number(port), hostname);
      peer.on('error', () => socket.destroy());
      socket.on('close', () => peer.destroy());
      peer.on('close', () => socket.destroy());
      socket.pipe(peer).pipe(socket);
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  reset(): void {
    this.script = undefined;
    for (const socket of this.sockets) socket.destroy();
  }

  async stop(): Promise<void> {
    this.reset();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

/** Calls `onHead` once the request head has arrived on `socket`, with the body bytes that came with it. */
function onRequestHead(socket: Socket, onHead: (head: string, bodySoFar: Buffer) => void): void {
  let data = Buffer.alloc(0);
  let seen = false;
  socket.on('data', (chunk: Buffer) => {
    if (seen) return;
    data = Buffer.concat([data, chunk]);
    const end = data.indexOf('\r\n\r\n');
    if (end === -1) return;
    seen = true;
    onHead(data.subarray(0, end).toString('latin1'), data.subarray(end + 4));
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Metric value from the Prometheus text, 0 when absent. */
function metric(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.split(' ')[1]) : 0;
}

/** A raw client connection whose bytes are collected; the test decides when to write, read and close. */
function rawClient(port: number) {
  const socket = connect(port, '127.0.0.1');
  const client = { socket, data: Buffer.alloc(0), closed: false, reset: false };
  socket.on('data', (chunk: Buffer) => (client.data = Buffer.concat([client.data, chunk])));
  socket.on('error', () => (client.reset = true));
  socket.on('close', () => (client.closed = true));
  return client;
}

async function until(condition: () => boolean, boundMs = 30_000): Promise<boolean> {
  const end = Date.now() + boundMs;
  while (!condition() && Date.now() < end) await sleep(20);
  return condition();
}

let stack: EdgeStack;
let upstream: ScriptedUpstream;
beforeAll(async () => {
  upstream = await new ScriptedUpstream(() => stack.upstream.url).start();
  stack = await EdgeStack.start({
    env: { UPSTREAM_URL: upstream.url },
    gatewayYaml: (t) =>
      t
        .replace('maxSockets: 512', 'maxSockets: 2')
        .replace('headersTimeoutMs: 10000', 'headersTimeoutMs: 3000')
        .replace('requestTimeoutMs: 60000', 'requestTimeoutMs: 4000'),
  });
});
afterAll(async () => {
  await stack?.stop();
  await upstream?.stop();
});
beforeEach(() => {
  upstream.reset();
  stack.upstream.reset();
});

async function expectStillServing() {
  upstream.reset();
  stack.upstream.reset();
  await stack.sentinel();
  expect(stack.gateway.process.child.exitCode).toBeNull();
}

const post = (length: number) =>
  `POST /v1/categories HTTP/1.1\r\n${stack.auth}Content-Type: application/octet-stream\r\nContent-Length: ${length}\r\n\r\n`;
const get = (target = '/v1/categories', extra = '') => stack.send([`GET ${target} HTTP/1.1\r\n${stack.auth}${extra}\r\n`]);
const status = (client: { data: Buffer }) => Number(/^HTTP\/1\.1 (\d{3})/.exec(client.data.toString('latin1'))?.[1] ?? 0);

describe('the request body, streamed by undici from the client connection', () => {
  it('an upstream reset while the body is still arriving is a 502 for the client, counted as the upstream’s', async () => {
    const before = await stack.metrics();
    upstream.script = (socket) => onRequestHead(socket, () => socket.resetAndDestroy());
    const client = rawClient(stack.port);
    client.socket.write(post(100_000) + 'a'.repeat(1000));
    expect(await until(() => status(client) !== 0)).toBe(true);
    expect(status(client)).toBe(502);
    client.socket.destroy();
    const after = await stack.metrics();
    const series = 'tollgate_upstream_errors_total{kind="bad_gateway"}';
    expect(metric(after, series) - metric(before, series)).toBe(1);
    const clientSide = 'tollgate_exchange_errors_total{side="client"}';
    expect(metric(after, clientSide) - metric(before, clientSide)).toBe(0);
    await expectStillServing();
  });

  it('an upstream that stops reading a large body is a 504 (the body waits, nothing buffers it)', async () => {
    upstream.script = (socket) => onRequestHead(socket, () => socket.pause());
    const size = 32 * 1024 * 1024;
    const client = rawClient(stack.port);
    client.socket.write(post(size));
    const chunk = Buffer.alloc(64 * 1024, 'a');
    let sent = 0;
    const pump = () => {
      while (sent < size && !client.closed) {
        sent += chunk.length;
        if (!client.socket.write(chunk)) return void client.socket.once('drain', pump);
      }
    };
    pump();
    expect(await until(() => status(client) !== 0, 60_000)).toBe(true);
    expect(status(client)).toBe(504);
    // TCP backpressure held the client: far from the whole body left it.
    expect(sent).toBeLessThan(size);
    client.socket.destroy();
    await expectStillServing();
  });

  it('an upstream that answers before reading the body: the client gets that answer, connection open', async () => {
    upstream.script = (socket) =>
      onRequestHead(socket, () => socket.write('HTTP/1.1 413 Payload Too Large\r\nContent-Length: 5\r\n\r\nlarge'));
    const client = rawClient(stack.port);
    client.socket.write(post(100_000) + 'a'.repeat(1000));
    await sleep(200);
    client.socket.write('b'.repeat(1000));
    expect(await until(() => client.data.toString('latin1').endsWith('large'))).toBe(true);
    expect(status(client)).toBe(413);
    expect(client.reset).toBe(false);
    client.socket.destroy();
    await expectStillServing();
  });

  it('a client that leaves mid-body: the upstream request is torn down, nothing is framed', async () => {
    const events: string[] = [];
    upstream.script = (socket) => {
      socket.on('data', () => events.push('data'));
      socket.on('close', () => events.push('close'));
    };
    const client = rawClient(stack.port);
    client.socket.write(post(1000) + 'a'.repeat(10));
    expect(await until(() => events.includes('data'))).toBe(true);
    client.socket.destroy();
    expect(await until(() => events.includes('close'))).toBe(true);
    await expectStillServing();
  });
});

describe('the pool queue (upstream.maxSockets: 2, both busy)', () => {
  /** Two requests the upstream holds; returns their sockets once both heads arrived. */
  async function occupyPool(onHead: (socket: Socket) => void = () => {}) {
    const held: Socket[] = [];
    const heads: string[] = [];
    let connections = 0;
    upstream.script = (socket) => {
      connections++;
      onRequestHead(socket, (head) => {
        heads.push(head.split('\r\n')[0]!);
        held.push(socket);
        onHead(socket);
      });
    };
    const clients = ['/v1/categories/1', '/v1/categories/2'].map((target) => {
      const client = rawClient(stack.port);
      client.socket.write(`GET ${target} HTTP/1.1\r\n${stack.auth}\r\n`);
      return client;
    });
    expect(await until(() => heads.length === 2)).toBe(true);
    return { held, heads, clients, connections: () => connections };
  }

  it('a client that leaves while queued: its request is never sent, and no pooled connection is lost', async () => {
    const pool = await occupyPool();
    const queued = rawClient(stack.port);
    queued.socket.write(`GET /v1/categories/3 HTTP/1.1\r\n${stack.auth}\r\n`);
    await sleep(300);
    queued.socket.destroy();
    await sleep(100);
    for (const socket of pool.held) socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    expect(await until(() => pool.clients.every((c) => c.data.toString('latin1').endsWith('ok')))).toBe(true);
    await sleep(300);
    expect(pool.heads).toEqual(['GET /v1/categories/1 HTTP/1.1', 'GET /v1/categories/2 HTTP/1.1']);
    // The queued request was dropped without closing the connection it was handed.
    expect(pool.held.filter((socket) => socket.destroyed)).toEqual([]);
    expect(pool.connections()).toBe(2);
    for (const client of pool.clients) client.socket.destroy();
    await expectStillServing();
  });

  it('a request queued behind responses that stream on for ever gets 504 after upstream.timeoutMs', async () => {
    const before = await stack.metrics();
    const timers: NodeJS.Timeout[] = [];
    // Each response sends a byte every 400 ms: never idle long enough for bodyTimeout (1500 ms).
    const pool = await occupyPool((socket) => {
      socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n');
      timers.push(setInterval(() => socket.write('1\r\nx\r\n'), 400));
    });
    const queued = rawClient(stack.port);
    queued.socket.write(`GET /v1/categories/3 HTTP/1.1\r\n${stack.auth}\r\n`);
    const answered = await until(() => status(queued) !== 0, 60_000);
    for (const timer of timers) clearInterval(timer);
    expect(answered).toBe(true);
    expect(status(queued)).toBe(504);
    // The streams end; the request that was answered 504 is then never sent.
    for (const socket of pool.held) socket.write('0\r\n\r\n');
    expect(await until(() => pool.clients.every((c) => c.data.toString('latin1').endsWith('0\r\n\r\n')))).toBe(true);
    await sleep(300);
    expect(pool.heads).toHaveLength(2);
    const series = 'tollgate_upstream_errors_total{kind="gateway_timeout"}';
    expect(metric(await stack.metrics(), series) - metric(before, series)).toBe(1);
    for (const client of [...pool.clients, queued]) client.socket.destroy();
    await expectStillServing();
  });
});

describe('responses relayed from undici', () => {
  it('a 64 MiB body to a client that reads slowly: all of it, paced by the client (no buffering, no listener build-up)', async () => {
    const size = 64 * 1024 * 1024;
    upstream.script = (socket) =>
      onRequestHead(socket, () => {
        socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${size}\r\n\r\n`);
        const chunk = Buffer.alloc(64 * 1024, 'z');
        let sent = 0;
        const pump = () => {
          while (sent < size) {
            sent += chunk.length;
            if (!socket.write(chunk)) return void socket.once('drain', pump);
          }
        };
        pump();
      });
    const pid = stack.gateway.process.pid;
    const rssBefore = residentBytes(pid);
    const client = rawClient(stack.port);
    client.socket.removeAllListeners('data');
    let received = 0;
    client.socket.on('data', (chunk: Buffer) => (received += chunk.length));
    client.socket.pause();
    client.socket.write(`GET /v1/categories HTTP/1.1\r\n${stack.auth}\r\n`);
    await sleep(1500);
    const rssStalled = residentBytes(pid);
    // Hundreds of pause/resume turns: one 'drain' listener per pause, each removed when it fires.
    for (let i = 0; i < 300 && received < size; i++) {
      client.socket.resume();
      await sleep(2);
      client.socket.pause();
      await sleep(3);
    }
    client.socket.resume();
    expect(await until(() => received >= size, 60_000)).toBe(true);
    expect(rssStalled - rssBefore).toBeLessThan(24 * 1024 * 1024);
    expect(stack.gateway.process.lines.filter((line) => /MaxListenersExceeded|Warning/.test(line))).toEqual([]);
    client.socket.destroy();
    await expectStillServing();
  });

  it('obs-text bytes (0x80-0xff) in header values pass byte for byte, both ways', async () => {
    const obs = Buffer.from([0xe9, 0x80, 0xff]);
    stack.upstream.respond = (_request, socket) =>
      socket.write(Buffer.concat([Buffer.from('HTTP/1.1 200 OK\r\nX-Obs: a'), obs, Buffer.from('b\r\nContent-Length: 2\r\n\r\nok')]));
    const result = await stack.send([
      Buffer.concat([Buffer.from(`GET /v1/categories HTTP/1.1\r\n${stack.auth}X-Client: c`), obs, Buffer.from('d\r\n\r\n')]),
    ]);
    expect(stack.upstream.requests[0]!.raw.includes(Buffer.concat([Buffer.from('x-client: c'), obs, Buffer.from('d\r\n')]))).toBe(true);
    expect(Buffer.from(result.raw, 'latin1').includes(Buffer.concat([Buffer.from('x-obs: a'), obs, Buffer.from('b\r\n')]))).toBe(true);
  });

  it('fields named like Object.prototype members are relayed as the upstream sent them', async () => {
    stack.upstream.respond = (_request, socket) =>
      socket.write(
        'HTTP/1.1 200 OK\r\nConstructor: one\r\ntoString: two\r\nvalueOf: three\r\n__proto__: four\r\nContent-Length: 2\r\n\r\nok',
      );
    const response = (await get()).responses[0];
    expect(response?.status).toBe(200);
    expect(headerOf(response, 'constructor')).toBe('one');
    expect(headerOf(response, 'tostring')).toBe('two');
    expect(headerOf(response, 'valueof')).toBe('three');
    expect(headerOf(response, '__proto__')).toBe('four');
  });

  it('Set-Cookie fields stay separate, names of any case, 300 fields, a second Content-Type dropped', async () => {
    let head =
      'HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nSET-COOKIE: b=2\r\nX-MiXeD: m\r\nContent-Type: text/plain\r\nContent-Type: text/html\r\n';
    for (let i = 0; i < 300; i++) head += `X-H${i}: ${i}\r\n`;
    stack.upstream.respond = (_request, socket) => socket.write(`${head}Content-Length: 2\r\n\r\nok`);
    const response = (await get()).responses[0]!;
    expect(response.headers.filter(([name]) => name === 'set-cookie').map(([, value]) => value)).toEqual(['a=1', 'b=2']);
    expect(headerOf(response, 'x-mixed')).toBe('m');
    expect(response.headers.filter(([name]) => name === 'content-type')).toEqual([['content-type', 'text/plain']]);
    expect(response.headers.filter(([name]) => /^x-h\d+$/.test(name))).toHaveLength(300);
    expect(response.body).toBe('ok');
  });

  it('102 and 103 interim responses are not relayed; the final one is', async () => {
    stack.upstream.respond = (_request, socket) =>
      socket.write(
        'HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok',
      );
    const result = await get();
    expect(result.responses.map((r) => r.status)).toEqual([200]);
    expect(result.responses[0]!.body).toBe('ok');
  });

  it.each([204, 304])('a %i with a Content-Length is relayed (it has no content), not a 502', async (code) => {
    const before = await stack.metrics();
    stack.upstream.respond = (_request, socket) => socket.write(`HTTP/1.1 ${code} X\r\nETag: "e1"\r\nContent-Length: 1234\r\n\r\n`);
    const response = (await get()).responses[0];
    expect(response?.status).toBe(code);
    expect(headerOf(response, 'etag')).toBe('"e1"');
    const after = await stack.metrics();
    for (const kind of ['bad_gateway', 'after_response', 'aborted_mid_response']) {
      const series = `tollgate_upstream_errors_total{kind="${kind}"}`;
      expect(metric(after, series) - metric(before, series)).toBe(0);
    }
    await expectStillServing();
  });

  it.each([
    ['HEAD', 200],
    ['GET', 204],
    ['GET', 304],
  ] as const)('bytes after a bodiless response (%s, %i) never reach the next client', async (method, code) => {
    stack.upstream.respond = (_request, socket, index) =>
      socket.write(
        index === 0
          ? `HTTP/1.1 ${code} X\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\npoisoned`
          : 'HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nfine',
      );
    const first = await stack.send([`${method} /v1/categories HTTP/1.1\r\n${stack.auth}\r\n`], { head: method === 'HEAD' });
    expect(first.responses[0]?.status).toBe(code);
    for (let i = 0; i < 3; i++) expect((await get()).responses[0]?.body).toBe('fine');
    await expectStillServing();
  });

  it('a close-delimited body and a chunked body with trailers arrive whole', async () => {
    stack.upstream.respond = (_request, socket) => socket.end('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil-close');
    expect((await get()).responses[0]?.body).toBe('until-close');
    stack.upstream.reset();
    stack.upstream.respond = (_request, socket) =>
      socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n3\r\nabc\r\n0\r\nX-T: t\r\n\r\n');
    expect((await get()).responses[0]?.body).toBe('abc');
  });
});

describe('client headers undici refuses in a request never reach it', () => {
  it.each([
    'Keep-Alive: timeout=5\r\n',
    'Upgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n',
    'TE: trailers\r\n',
    'Proxy-Connection: keep-alive\r\n',
    'Connection: close\r\n',
    'Connection: host, content-length, transfer-encoding\r\n',
    'Transfer_Encoding: chunked\r\n',
    'Trailer: x\r\n',
    'Expect: 100-continue\r\n',
  ])('%j: forwarded without it, 200', async (extra) => {
    const result = await get('/v1/categories', extra);
    expect(result.responses.at(-1)?.status).toBe(200);
    const request = stack.upstream.requests[0]!;
    expect(
      request.headers.filter(([name]) => /^(keep-alive|upgrade|te|trailer|expect|proxy-connection|transfer.encoding)$/.test(name)),
    ).toEqual([]);
    expect(stack.upstream.header(request, 'connection')).toEqual(['keep-alive']);
  });
});
