import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_ASSERTION_SECRET } from '../helpers/assertion.js';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, createKey, startBackend, startGateway, type CreatedKey, type GatewayHandle } from '../helpers/stack.js';

// OpenTelemetry traces across real processes: a gateway and the bundled backend exporting over
// OTLP/HTTP to a receiver in this test that decodes the export requests (protobuf and JSON).

const ADMIN_TOKEN = 'ops:tracing-test-admin-token-0123456789abcdefghij';
const CLIENT_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_SPAN = '00f067aa0ba902b7';
const SERVER = 2;
const CLIENT = 3;
const INTERNAL = 1;

let redis: TestRedis;
let key: CreatedKey;
const stoppers: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  redis = await TestRedis.start();
  key = await createKey(redis, ['--plan', 'business']);
});

afterAll(async () => {
  for (const stop of stoppers.reverse()) await stop();
  await redis?.stop();
});

/** OTEL_* for a process exporting to `receiver` quickly (a 50 ms batch delay). */
function otel(endpoint: string, extra: Record<string, string> = {}): Record<string, string> {
  return { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_BSP_SCHEDULE_DELAY: '50', ...extra };
}

async function gatewayWith(upstreamUrl: string, env: Record<string, string | undefined>): Promise<GatewayHandle> {
  const gateway = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: upstreamUrl, TOLLGATE_ADMIN_TOKENS: ADMIN_TOKEN, ...env });
  stoppers.push(() => gateway.process.stop());
  return gateway;
}

async function backendWith(env: Record<string, string | undefined>) {
  const backend = await startBackend({ REDIS_URL: redis.url, ...env });
  stoppers.push(() => backend.process.stop());
  return backend;
}

const inTrace = (traceId: string) => (span: ReceivedSpan) => span.traceId === traceId;

describe('one request, one trace across gateway and backend (http/protobuf, the default)', () => {
  let receiver: OtlpReceiver;
  let gateway: GatewayHandle;
  let response: Response;
  let spans: ReceivedSpan[];

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    stoppers.push(() => receiver.close());
    const backend = await backendWith(otel(receiver.url));
    gateway = await gatewayWith(backend.url, otel(receiver.url));
    response = await fetch(`${gateway.url}/v1/categories?secret=${key.key}`, {
      headers: { ...bearer(key.key), traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`, tracestate: 'vendor=abc,other=x1' },
    });
    await response.text();
    // gateway: server, key lookup, quota decision, one try; backend: server.
    spans = await receiver.waitFor(inTrace(CLIENT_TRACE), 5);
  });

  it('exports protobuf (application/x-protobuf)', () => {
    expect(response.status).toBe(200);
    expect(receiver.contentTypes.length).toBeGreaterThan(0);
    for (const type of receiver.contentTypes) expect(type).toBe('application/x-protobuf');
  });

  it("continues the client's trace: the gateway's server span is the child of the client's span", () => {
    const server = spans.find((s) => s.service === 'tollgate-gateway' && s.kind === SERVER)!;
    expect(server.parentSpanId).toBe(CLIENT_SPAN);
    expect(server.traceState).toBe('vendor=abc,other=x1');
    expect(server.name).toBe('GET /v1/categories');
    expect(server.attributes).toMatchObject({
      'http.request.method': 'GET',
      'http.route': '/v1/categories',
      'http.response.status_code': 200,
      'url.scheme': 'http',
      'tollgate.key_id': key.id,
      'tollgate.plan': 'business',
      'tollgate.decision': 'admitted',
      'tollgate.service': 'default',
      'tollgate.tries': 1,
    });
  });

  it('has the key lookup, the quota decision (with its batch size) and the upstream try as children of the server span', () => {
    const server = spans.find((s) => s.service === 'tollgate-gateway' && s.kind === SERVER)!;
    const children = spans.filter((s) => s.parentSpanId === server.spanId);
    const lookup = children.find((s) => s.name === 'tollgate key lookup')!;
    expect(lookup.kind).toBe(INTERNAL);
    expect(lookup.attributes).toMatchObject({ 'tollgate.key_id': key.id, 'tollgate.lookup': 'found' });
    const quota = children.find((s) => s.name === 'tollgate quota decision')!;
    expect(quota.attributes).toMatchObject({ 'tollgate.key_id': key.id, 'tollgate.quota.verdict': 'allowed', 'tollgate.quota.cost': 1 });
    expect(quota.attributes['tollgate.quota.batch_size']).toBeGreaterThanOrEqual(1);
    const attempt = children.find((s) => s.kind === CLIENT)!;
    expect(attempt.name).toBe('GET');
    expect(attempt.attributes).toMatchObject({
      'http.request.method': 'GET',
      'server.address': '127.0.0.1',
      'tollgate.service': 'default',
      'tollgate.retry': 0,
      'tollgate.outcome': 'ok',
      'http.response.status_code': 200,
    });
    expect(attempt.attributes['server.port']).toBe(
      Number(new URL(String(gateway.process.logs().find((l) => l.msg === 'gateway listening')?.upstream)).port),
    );
  });

  it("has the backend's server span as the child of the gateway's try span", () => {
    const attempt = spans.find((s) => s.service === 'tollgate-gateway' && s.kind === CLIENT)!;
    const backend = spans.find((s) => s.service === 'tollgate-backend')!;
    expect(backend.kind).toBe(SERVER);
    expect(backend.parentSpanId).toBe(attempt.spanId);
    expect(backend.name).toBe('GET /v1/categories');
    expect(backend.attributes).toMatchObject({ 'http.route': '/v1/categories', 'http.response.status_code': 200 });
  });

  it('names the trace and the server span in traceresponse, and the trace id in the access line', async () => {
    const server = spans.find((s) => s.service === 'tollgate-gateway' && s.kind === SERVER)!;
    expect(response.headers.get('traceresponse')).toBe(`00-${CLIENT_TRACE}-${server.spanId}-01`);
    // Waited for: the line is written when the response closes, and read from the process's stdout.
    const line = await gateway.process.waitForLog('request', 60_000, (l) => l.traceId === CLIENT_TRACE);
    expect(line).toMatchObject({ traceId: CLIENT_TRACE, service: 'default', tries: 1 });
  });

  it('exports no key, no assertion, no secret: not in any attribute, not anywhere in the export bodies', async () => {
    await fetch(`${gateway.url}/v1/categories`, { headers: bearer('tg_live_notakey') }).then((r) => r.text());
    await fetch(`${gateway.url}/v1/pets/7`, { headers: bearer(key.key) }).then((r) => r.text());
    await receiver.waitFor((s) => s.attributes['http.route'] === '/v1/pets/{petId}' && s.service === 'tollgate-backend');
    const secretPart = key.key.split('_').at(-1)!;
    const all = Buffer.concat(receiver.rawBodies).toString('latin1');
    for (const secret of [key.key, secretPart, TEST_ASSERTION_SECRET, ADMIN_TOKEN.split(':')[1]!, 'Bearer', 'tg_live_notakey'])
      expect(all, secret).not.toContain(secret);
    for (const span of receiver.spans)
      for (const [name, value] of Object.entries(span.attributes)) {
        // A JWT (the assertion) starts with the base64url of `{"`.
        expect(String(value), `${span.name} ${name}`).not.toMatch(/eyJ|Bearer|\?/);
      }
    // The raw path with its id is never a span name: the route template is.
    expect(receiver.spans.map((s) => s.name)).not.toContain('GET /v1/pets/7');
  });

  it('puts the trace id on the request-duration histogram as an exemplar when the scrape asks for OpenMetrics', async () => {
    const open = await fetch(`${gateway.adminUrl}/metrics`, { headers: { accept: 'application/openmetrics-text; version=1.0.0' } });
    expect(open.headers.get('content-type')).toContain('application/openmetrics-text');
    const page = await open.text();
    expect(page).toMatch(
      new RegExp(`tollgate_request_duration_seconds_bucket\\{[^}]*route="/v1/categories"[^}]*\\} \\d+ # \\{trace_id="${CLIENT_TRACE}"\\}`),
    );
    expect(page.trimEnd().endsWith('# EOF')).toBe(true);
    // The Prometheus text format is unchanged, counters keep their _total, and has no exemplars.
    const plain = await fetch(`${gateway.adminUrl}/metrics`).then((r) => r.text());
    expect(plain).toContain('tollgate_requests_total{');
    expect(plain).toContain('tollgate_trace_spans_dropped_total');
    expect(plain).not.toContain('# {trace_id');
  });
});

describe('trace context from the client', () => {
  let receiver: OtlpReceiver;
  let gateway: GatewayHandle;
  let upstream: EchoUpstream;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    stoppers.push(() => receiver.close());
    upstream = await new EchoUpstream().start();
    stoppers.push(() => upstream.stop());
    gateway = await gatewayWith(upstream.url, otel(receiver.url, { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }));
  });

  it('http/json exports JSON', async () => {
    const res = await fetch(`${gateway.url}/v1/categories`, { headers: bearer(key.key) });
    await res.text();
    const traceId = res.headers.get('traceresponse')!.split('-')[1]!;
    const [server] = await receiver.waitFor((s) => s.traceId === traceId && s.kind === SERVER);
    expect(server!.parentSpanId).toBe('');
    expect(receiver.contentTypes.every((t) => t.startsWith('application/json'))).toBe(true);
  });

  it('an invalid traceparent is ignored: a new trace starts, and the value is never logged or sent upstream', async () => {
    const bad = `00-${'a'.repeat(32)}-${'0'.repeat(16)}-01"injected`;
    const res = await fetch(`${gateway.url}/v1/categories`, { headers: { ...bearer(key.key), traceparent: bad, tracestate: 'bad state' } });
    await res.text();
    const [, traceId, spanId, flags] = res.headers.get('traceresponse')!.split('-');
    expect(traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(traceId).not.toBe('a'.repeat(32));
    expect(flags).toBe('01');
    const sent = upstream.seen.at(-1)!.headers;
    expect(sent.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    expect(sent.traceparent).not.toContain(spanId);
    expect(sent.tracestate).toBeUndefined();
    expect(gateway.process.output()).not.toContain('injected');
  });

  it("a missing traceparent starts a trace; the upstream's parent is the gateway's try span", async () => {
    const res = await fetch(`${gateway.url}/v1/categories`, { headers: bearer(key.key) });
    await res.text();
    const traceId = res.headers.get('traceresponse')!.split('-')[1]!;
    const parent = String(upstream.seen.at(-1)!.headers.traceparent).split('-')[2];
    const spans = await receiver.waitFor(inTrace(traceId), 3);
    expect(spans.find((s) => s.kind === CLIENT)!.spanId).toBe(parent);
  });

  it('refusals are traced with their decision: unauthenticated, with the refusal code', async () => {
    const res = await fetch(`${gateway.url}/v1/categories`);
    await res.text();
    expect(res.status).toBe(401);
    const traceId = res.headers.get('traceresponse')!.split('-')[1]!;
    const [server] = await receiver.waitFor((s) => s.traceId === traceId && s.kind === SERVER);
    expect(server!.attributes).toMatchObject({
      'tollgate.decision': 'unauthenticated',
      'tollgate.refusal': 'missing_api_key',
      'http.response.status_code': 401,
    });
    expect(server!.attributes['tollgate.key_id']).toBeUndefined();
  });
});

describe('sampling', () => {
  it('ratio 0: nothing exported for new traces; a sampled traceparent is honoured, an unsampled one too', async () => {
    const receiver = await startOtlpReceiver();
    stoppers.push(() => receiver.close());
    const upstream = await new EchoUpstream().start();
    stoppers.push(() => upstream.stop());
    const gateway = await gatewayWith(
      upstream.url,
      otel(receiver.url, { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0' }),
    );
    for (let i = 0; i < 20; i++) await fetch(`${gateway.url}/v1/categories`, { headers: bearer(key.key) }).then((r) => r.text());
    // Unsampled, the upstream still gets the trace (flag 00) and the client its id.
    expect(upstream.seen.at(-1)!.headers.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
    const unsampledParent = `00-${'1'.repeat(32)}-${'2'.repeat(16)}-00`;
    await fetch(`${gateway.url}/v1/categories`, { headers: { ...bearer(key.key), traceparent: unsampledParent } }).then((r) => r.text());
    expect(upstream.seen.at(-1)!.headers.traceparent).toMatch(new RegExp(`^00-${'1'.repeat(32)}-[0-9a-f]{16}-00$`));
    const sampledParent = `00-${'3'.repeat(32)}-${'4'.repeat(16)}-01`;
    await fetch(`${gateway.url}/v1/categories`, { headers: { ...bearer(key.key), traceparent: sampledParent } }).then((r) => r.text());
    const spans = await receiver.waitFor(inTrace('3'.repeat(32)), 2);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(new Set(receiver.spans.map((s) => s.traceId))).toEqual(new Set(['3'.repeat(32)]));
    expect(spans.find((s) => s.kind === SERVER)!.parentSpanId).toBe('4'.repeat(16));
  });

  it('no endpoint: no tracing at all (no traceresponse, no traceId, the client traceparent passed on untouched)', async () => {
    const upstream = await new EchoUpstream().start();
    stoppers.push(() => upstream.stop());
    const gateway = await gatewayWith(upstream.url, {});
    const parent = `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`;
    const res = await fetch(`${gateway.url}/v1/categories`, { headers: { ...bearer(key.key), traceparent: parent } });
    await res.text();
    expect(res.headers.get('traceresponse')).toBeNull();
    expect(upstream.seen.at(-1)!.headers.traceparent).toBe(parent);
    expect(gateway.process.logs().some((l) => 'traceId' in l)).toBe(false);
  });
});

describe('an exporter that is down or stuck', () => {
  for (const kind of ['closed port', 'receiver that never answers'] as const) {
    it(`${kind}: requests stay fast and all 200; the bounded queue's drops are counted`, async () => {
      let endpoint: string;
      if (kind === 'closed port') {
        const gone = await startOtlpReceiver();
        endpoint = gone.url;
        await gone.close();
      } else {
        const hanging = await startOtlpReceiver('hang');
        stoppers.push(() => hanging.close());
        endpoint = hanging.url;
      }
      const upstream = await new EchoUpstream().start();
      stoppers.push(() => upstream.stop());
      const gateway = await gatewayWith(
        upstream.url,
        otel(endpoint, { OTEL_BSP_MAX_QUEUE_SIZE: '20', OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '10', OTEL_EXPORTER_OTLP_TIMEOUT: '60000' }),
      );
      const statuses: number[] = [];
      let slowestMs = 0;
      const timed = async () => {
        const started = performance.now();
        const res = await fetch(`${gateway.url}/v1/categories`, { headers: bearer(key.key) });
        await res.text();
        slowestMs = Math.max(slowestMs, performance.now() - started);
        return res.status;
      };
      for (let round = 0; round < 10; round++) statuses.push(...(await Promise.all(Array.from({ length: 20 }, timed))));
      expect(statuses.filter((s) => s !== 200)).toEqual([]);
      // The exporter's own timeout is 60 s here: a request that waited on an export would take at
      // least that long (timers never fire early), so anything sooner proves it did not, however
      // loaded the machine.
      expect(slowestMs).toBeLessThan(60_000);
      const page = await fetch(`${gateway.adminUrl}/metrics`).then((r) => r.text());
      // Dropped from the full queue, or with an export that failed: none of them reached anyone.
      const dropped = [...page.matchAll(/tollgate_trace_spans_dropped_total\{reason="(queue_full|export_failed)"\} (\d+)/g)];
      // 200 requests of at least two spans each (the request's, its upstream try's; a quota decision
      // from a lease has no span of its own): most of those 400 were dropped, counted. The queue, a
      // batch stuck in an export and the last round's spans still ending may hold some 50.
      expect(dropped.reduce((sum, [, , n]) => sum + Number(n), 0)).toBeGreaterThan(300);
      if (kind === 'receiver that never answers') expect(page).toMatch(/tollgate_trace_spans_dropped_total\{reason="queue_full"\} [1-9]/);
    });
  }
});
