import fc from 'fast-check';
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EdgeStack } from '../helpers/edge-stack.js';
import { FLAG, FRAME, headerBlock, RawH2 } from '../helpers/raw-h2.js';
import { TestCerts } from '../helpers/tls-certs.js';

// Request lines and heads fuzzed as classes, on every listener: the plain one, the TLS one (HTTP/1.1
// and HTTP/2) and the admin one. Methods (case, length, unknown tokens, odd bytes), request targets
// (origin, absolute, authority and asterisk forms, odd bytes, long), versions (every HTTP/d.d and
// malformed ones), line ends, bytes before the request line, field names and values, many fields. Whatever arrives, the property holds:
// 1. it is answered with a well-formed status line whose status the RFCs allow for it (never a 500:
//    that would be a fault of ours), or the connection (the HTTP/2 stream) is closed or reset;
// 2. within HEAD_FUZZ_DEADLINE_MS (a bound against hangs: 15 s here, 1 s in `npm run fuzz`);
// 3. the process stays up, and logs nothing at error level (client input is never our fault).
// HEAD_FUZZ_RUNS sets the cases per listener (`npm run fuzz`: 20,000; CI runs a sample).

const RUNS = Number(process.env.HEAD_FUZZ_RUNS ?? 300);
const DEADLINE_MS = Number(process.env.HEAD_FUZZ_DEADLINE_MS ?? 15_000);
/** What an answer to any request head may be: the gateway's refusals, the upstream's 200, the admin's own. */
const ALLOWED = new Set([200, 204, 400, 401, 403, 404, 405, 408, 410, 413, 414, 415, 417, 429, 431, 501, 502, 503, 504, 505]);

let plain: EdgeStack;
let tls: EdgeStack;
let certs: TestCerts;

// Enough failed authentications per address that most cases reach past the failed-auth limiter.
const roomyLimits = (t: string) => t.replace(/unauthenticated:\n {2}perMinute: \d+/, 'unauthenticated:\n  perMinute: 1000000');

beforeAll(async () => {
  certs = new TestCerts();
  const served = certs.make('served', 'localhost');
  [plain, tls] = await Promise.all([
    EdgeStack.start({ gatewayYaml: roomyLimits }),
    EdgeStack.start({ gatewayYaml: roomyLimits, env: { GATEWAY_TLS_CERT: served.cert, GATEWAY_TLS_KEY: served.key } }),
  ]);
}, 120_000);
afterAll(async () => {
  await plain?.stop();
  await tls?.stop();
  certs?.remove();
});

const token = fc.stringMatching(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,24}$/);
const oddBytes = fc.string({ unit: fc.integer({ min: 0, max: 255 }).map((c) => String.fromCharCode(c)), maxLength: 24 });
const method = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT', 'PRI') },
  fc.constantFrom('get', 'Get', 'gEt', 'M-SEARCH', 'PROPFIND', 'QUERY', 'PURGE', 'LINK'),
  token,
  fc.stringMatching(/^[A-Z]{200,4000}$/),
  oddBytes,
);
const segment = fc.oneof(
  fc.constantFrom('v1', 'categories', 'pets', '42', 'store', 'orders', 'openapi.yaml', '.', '..', '', '%2e', '%2F', '%00', '%zz', 'é'),
  token,
  oddBytes,
);
const path = fc.array(segment, { maxLength: 8 }).map((s) => '/' + s.join('/'));
const query = fc.oneof(
  fc.constant(''),
  token.map((t) => `?${t}`),
  oddBytes.map((t) => `?${t}`),
);
const target = fc.oneof(
  { weight: 4, arbitrary: fc.tuple(path, query).map(([p, q]) => p + q) },
  fc
    .tuple(fc.constantFrom('http', 'https', 'HTTP', 'ftp', ''), fc.constantFrom('h.test', 'h.test:80', '[::1]:1', '', 'a@b', '%00'), path)
    .map(([scheme, host, p]) => `${scheme}://${host}${p}`),
  fc.constantFrom('h.test:443', 'localhost:80', '[::1]:443', ':80', 'h.test:'),
  fc.constant('*'),
  fc.stringMatching(/^\/[a-z]{2000,12000}$/),
  oddBytes,
);
const digit = fc.integer({ min: 0, max: 9 });
const version = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom('HTTP/1.1', 'HTTP/1.0') },
  fc.tuple(digit, digit).map(([a, b]) => `HTTP/${a}.${b}`),
  fc.constantFrom('', 'HTTP/1', 'HTTP/1.1.1', 'http/1.1', 'HTTP/11', 'HTTP/1.x', 'HTTPS/1.1', 'HTTP /1.1', 'HTTP/١.١', 'HTTP/1.1 '),
);
const fieldName = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom('host', 'accept', 'user-agent', 'x-forwarded-for', 'connection', 'upgrade', 'expect', 'te') },
  fc.constantFrom('cookie', 'x-request-id', 'traceparent', 'forwarded', 'keep-alive', 'proxy-connection', 'x-tollgate-plan', 'HOST'),
  token,
  fc.constantFrom('bad name', 'bad:name', 'na\x00me', 'é', ' host', 'host ', ''),
);
const fieldValue = fc.oneof(
  { weight: 3, arbitrary: fc.string({ maxLength: 40 }) },
  fc.constantFrom('close', 'keep-alive, upgrade', 'websocket', '100-continue', 'trailers', 'gzip', '127.0.0.1, ::1', '-1'),
  oddBytes,
  fc.constantFrom('a\r\n b', 'a\rb', 'a\nb', '\t', ' '),
  fc.stringMatching(/^[a-z]{1000,20000}$/),
);
const head = fc.record({
  // RFC 9112 §2.2: empty lines before the request line may be ignored; whitespace or NUL there may not.
  lead: fc.constantFrom('', '', '', '', '\r\n', '\r\n\r\n', '\n', ' ', '\t', '\x00'),
  method,
  target,
  version,
  sep: fc.constantFrom(' ', ' ', ' ', '  ', '\t'),
  eol: fc.constantFrom('\r\n', '\r\n', '\r\n', '\n'),
  host: fc.boolean(),
  auth: fc.boolean(),
  fields: fc.array(fc.tuple(fieldName, fieldValue), { maxLength: 6 }),
  // Many fields now and then: around the gateway's field-count limit, and far past it.
  many: fc.oneof({ weight: 6, arbitrary: fc.constant(0) }, fc.integer({ min: 90, max: 110 }), fc.integer({ min: 111, max: 3000 })),
});
type Head = typeof head extends fc.Arbitrary<infer T> ? T : never;

/** The head's bytes (latin1: one byte a char). Framing fields stay out: edge-fuzz.test.ts fuzzes bodies. */
function bytesOf(h: Head, auth: string): Buffer {
  const lines = [`${h.lead}${h.method}${h.sep}${h.target}${h.sep}${h.version}`];
  if (h.host) lines.push('Host: gateway.test');
  if (h.auth) lines.push(auth);
  for (const [name, value] of h.fields) if (!/^(content-length|transfer-encoding)$/i.test(name)) lines.push(`${name}: ${value}`);
  for (let i = 0; i < h.many; i++) lines.push(`x-f${i}: v`);
  return Buffer.from(lines.join(h.eol) + h.eol + h.eol, 'latin1');
}

interface Outcome {
  /** The first status line read, or undefined when the connection closed without one. */
  statusLine?: string;
  /** Closed by the gateway, or answered, before the deadline. */
  settled: boolean;
}

/** Sends `bytes` on a new connection and waits for a complete response head, or a close. */
function exchangeHead(open: () => Socket, bytes: Buffer): Promise<Outcome> {
  return new Promise((resolve) => {
    const socket = open();
    let data = '';
    const done = (outcome: Outcome) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(outcome);
    };
    const timer = setTimeout(() => done({ settled: false }), DEADLINE_MS);
    socket.on('data', (chunk: Buffer) => {
      data += chunk.toString('latin1');
      const end = data.indexOf('\r\n\r\n');
      if (end !== -1) done({ statusLine: data.slice(0, data.indexOf('\r\n')), settled: true });
    });
    socket.on('close', () => done({ statusLine: data ? data.split('\r\n')[0] : undefined, settled: true }));
    socket.on('error', () => undefined);
    socket.write(bytes);
  });
}

function checkOutcome(outcome: Outcome, bytes: Buffer): void {
  const shown = JSON.stringify(bytes.toString('latin1').slice(0, 200));
  expect(outcome.settled, `no answer and no close within ${DEADLINE_MS} ms: ${shown}`).toBe(true);
  if (outcome.statusLine === undefined) return;
  const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(outcome.statusLine)?.[1]);
  expect(ALLOWED.has(status), `${outcome.statusLine} for ${shown}`).toBe(true);
}

let sentinels = 0;

/**
 * After the cases: a well-formed request on `open`, and its access line awaited, so that every line
 * the cases caused (written when each response closed, in batches) has been read before they are checked.
 */
async function expectHealthy(stack: EdgeStack, open: () => Socket): Promise<void> {
  const path = `/v1/fuzz-sentinel-${++sentinels}`;
  const outcome = await exchangeHead(
    open,
    Buffer.from(`GET ${path} HTTP/1.1\r\nHost: gateway.test\r\nAuthorization: Bearer ${stack.key.key}\r\n\r\n`),
  );
  expect(outcome.statusLine).toBe('HTTP/1.1 200 OK');
  await stack.gateway.process.waitForLog('request', 120_000, (line) => line.path === path);
  expect(stack.gateway.process.exitStatus).toBeNull();
  const errors = stack.gateway.process.logs().filter((line) => Number(line.level) >= 50);
  expect(errors.map((line) => line.msg)).toEqual([]);
  const faults = stack.gateway.process.logs().filter((line) => line.msg === 'request' && line.status === 500);
  expect(faults).toEqual([]);
}

async function fuzzListener(open: () => Socket, stack: EdgeStack, sentinel = open): Promise<void> {
  await fc.assert(
    fc.asyncProperty(head, async (h) => {
      const bytes = bytesOf(h, `Authorization: Bearer ${stack.key.key}`);
      checkOutcome(await exchangeHead(open, bytes), bytes);
      // The recording upstream keeps every request: forget them as we go.
      if (stack.upstream.requests.length > 1000) stack.upstream.reset();
    }),
    { numRuns: RUNS },
  );
  await expectHealthy(stack, sentinel);
}

const openTlsH1 = () => tlsConnect({ host: '127.0.0.1', port: tls.port, rejectUnauthorized: false, ALPNProtocols: ['http/1.1'] });

describe('every HTTP/d.d version on the plain listener', () => {
  it('HTTP/2.0 in an HTTP/1 request line is 505 and a close (it used to hang the connection and log an error)', async () => {
    const outcome = await exchangeHead(
      () => netConnect(plain.port, '127.0.0.1'),
      Buffer.from('GET /v1/categories HTTP/2.0\r\nHost: x\r\n\r\n'),
    );
    expect(outcome).toEqual({ statusLine: 'HTTP/1.1 505 HTTP Version Not Supported', settled: true });
  });

  it('each of the hundred is answered with an allowed status or closed; 1.0 and 1.1 reach the chain', async () => {
    for (let major = 0; major <= 9; major++)
      for (let minor = 0; minor <= 9; minor++) {
        const bytes = Buffer.from(`GET /v1/categories HTTP/${major}.${minor}\r\nHost: x\r\n\r\n`);
        const outcome = await exchangeHead(() => netConnect(plain.port, '127.0.0.1'), bytes);
        checkOutcome(outcome, bytes);
        if (major === 1 && minor <= 1) expect(outcome.statusLine).toBe('HTTP/1.1 401 Unauthorized');
        if (major !== 1 && outcome.statusLine) expect(outcome.statusLine).toMatch(/^HTTP\/1\.1 (400|505) /);
      }
    await expectHealthy(plain, () => netConnect(plain.port, '127.0.0.1'));
  });
});

describe(`request heads fuzzed as classes (${RUNS} per listener)`, () => {
  it('the plain listener', { timeout: 3_600_000 }, async () => {
    await fuzzListener(() => netConnect(plain.port, '127.0.0.1'), plain);
  });

  it('the TLS listener, HTTP/1.1', { timeout: 3_600_000 }, async () => {
    await fuzzListener(openTlsH1, tls);
  });

  it('the admin listener', { timeout: 3_600_000 }, async () => {
    const port = Number(new URL(plain.gateway.adminUrl).port);
    await fuzzListener(
      () => netConnect(port, '127.0.0.1'),
      plain,
      () => netConnect(plain.port, '127.0.0.1'),
    );
  });

  it('the TLS listener, HTTP/2: pseudo-fields and fields as HPACK literals', { timeout: 3_600_000 }, async () => {
    // Mostly well-formed, so that many streams reach the gateway's own checks and the chain (nghttp2
    // resets the rest before Node sees them); each part malformed now and then.
    const mostly = <T>(valid: fc.Arbitrary<T>, odd: fc.Arbitrary<T>) => fc.oneof({ weight: 4, arbitrary: valid }, odd);
    const pseudo = fc.record({
      method: mostly(fc.constantFrom('GET', 'POST', 'HEAD', 'DELETE'), fc.oneof(fc.constantFrom('CONNECT', 'get', ''), token, oddBytes)),
      path: mostly(
        fc.tuple(path, query).map(([p, q]) => p + q),
        fc.oneof(target, fc.constant('')),
      ),
      scheme: mostly(fc.constant('https'), fc.constantFrom('http', 'ftp', '')),
      authority: mostly(fc.constant('gateway.test'), fc.constantFrom('gateway.test:443', '', 'a b', 'x@y')),
      omit: mostly(fc.constant([] as string[]), fc.subarray([':method', ':path', ':scheme', ':authority'])),
      extra: mostly(fc.constant(null), fc.constantFrom(':protocol', ':status', ':unknown')),
    });
    const h2Field = mostly(
      fc.tuple(
        fc.constantFrom('accept', 'user-agent', 'x-forwarded-for', 'te', 'x-request-id', 'cookie'),
        fc.stringMatching(/^[ -~]{0,40}$/),
      ),
      fc.tuple(fieldName, fieldValue),
    );
    await fc.assert(
      fc.asyncProperty(pseudo, fc.boolean(), fc.array(h2Field, { maxLength: 4 }), async (p, auth, fields) => {
        const list: Array<[string, string]> = [
          [':method', p.method],
          [':scheme', p.scheme],
          [':authority', p.authority],
          [':path', p.path],
        ];
        const sent = list.filter(([name]) => !p.omit.includes(name));
        if (p.extra) sent.push([p.extra, 'x']);
        if (auth) sent.push(['authorization', `Bearer ${tls.key.key}`]);
        // HPACK carries any bytes; names are sent lower-case, as HTTP/2 requires of a valid request.
        for (const [name, value] of fields) if (!/^(content-length|transfer-encoding)$/i.test(name)) sent.push([name.toLowerCase(), value]);
        const client = await RawH2.connect(tls.port);
        try {
          client.send(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, headerBlock(sent));
          const answered = await client
            .waitFor(
              (f) => (f.streamId === 1 && (f.type === FRAME.HEADERS || f.type === FRAME.RST_STREAM)) || f.type === FRAME.GOAWAY,
              DEADLINE_MS,
            )
            .then(
              () => true,
              () => client.closed,
            );
          expect(answered, `no answer, reset or close for ${JSON.stringify(sent).slice(0, 300)}`).toBe(true);
        } finally {
          client.close();
        }
        if (tls.upstream.requests.length > 1000) tls.upstream.reset();
      }),
      { numRuns: RUNS },
    );
    await expectHealthy(tls, openTlsH1);
    // Statuses are read from the access log (HPACK-decoding the answers is not this test's job).
    const statuses = tls.gateway.process.logs().filter((line) => line.msg === 'request' && line.http === '2');
    expect(statuses.length).toBeGreaterThan(0);
    for (const line of statuses) expect(ALLOWED.has(Number(line.status)), JSON.stringify(line)).toBe(true);
  });
});
