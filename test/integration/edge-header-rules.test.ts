import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin } from '../helpers/admin-client.js';
import { call, EdgeRulesStack, replacingServices } from '../helpers/edge-rules-stack.js';
import { runCli } from '../helpers/processes.js';
import { bearer, configCopy } from '../helpers/stack.js';

// Header rules against real processes (docs/policies.md, "Header rules"): a service's
// requestHeaders and responseHeaders, their variables, the fields the gateway owns refused at load,
// hot with gateway.yaml, shown by GET /admin/v1/services.

const rules = (version: string) => `
services:
  - name: categories
    paths: [/v1/categories]
    targets: [TARGET]
    requestHeaders:
      set: { x-api-version: "${version}", X-Caller: "\${consumer.id}/\${consumer.plan}", x-trace: "req-\${request.id}", authorization: "Basic dXA6c3RyZWFt" }
      remove: [x-debug]
    responseHeaders:
      set: { cache-control: no-store, x-served-by: tollgate-edge }
      remove: [server, X-Powered-By]
`;
const withRules = (version: string) => (yaml: string, target: string) =>
  replacingServices(yaml, rules(version).replaceAll('TARGET', target));

describe('header rules', () => {
  let stack: EdgeRulesStack;
  let key: { id: string; key: string; plan: string };

  beforeAll(async () => {
    stack = await EdgeRulesStack.start(withRules('2'));
    stack.target.behaviour = (req, res) => {
      res.setHeader('server', 'upstream/1.0');
      res.setHeader('x-powered-by', 'php');
      res.setHeader('cache-control', 'public, max-age=60');
      res.setHeader('x-keep', 'kept');
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ headers: req.headers }));
    };
    key = await stack.key();
  }, 120_000);
  afterAll(() => stack?.close());

  it('sets and removes request fields after the decision, with the consumer and request id filled in', async () => {
    const reply = await call(`${stack.gateway.url}/v1/categories`, {
      headers: { ...bearer(key.key), 'x-debug': '1', 'x-api-version': '1', 'x-request-id': 'hdr-test-000001' },
    });
    expect(reply.status).toBe(200);
    const seen = reply.json.headers;
    expect(seen['x-api-version']).toBe('2');
    expect(seen['x-debug']).toBeUndefined();
    expect(seen['x-caller']).toBe(`${key.id}/${key.plan}`);
    expect(seen['x-trace']).toBe('req-hdr-test-000001');
    // The client's own Authorization is never forwarded; the rule's upstream credential is.
    expect(seen.authorization).toBe('Basic dXA6c3RyZWFt');
    // The gateway's identity fields stand.
    expect(seen['x-tollgate-consumer-id']).toBe(key.id);
    expect(seen['x-tollgate-assertion']).toEqual(expect.any(String));
  });

  it("sets and removes response fields on the target's response, never on the gateway's own Error bodies", async () => {
    const reply = await call(`${stack.gateway.url}/v1/categories`, { headers: bearer(key.key) });
    expect(reply.headers.server).toBeUndefined();
    expect(reply.headers['x-powered-by']).toBeUndefined();
    expect(reply.headers['cache-control']).toBe('no-store');
    expect(reply.headers['x-served-by']).toBe('tollgate-edge');
    expect(reply.headers['x-keep']).toBe('kept');
    // The gateway's rate-limit fields are untouched.
    expect(reply.headers['x-ratelimit-limit']).toBeDefined();

    const refused = await call(`${stack.gateway.url}/v1/categories`, { headers: { authorization: 'Bearer nope' } });
    expect(refused.status).toBe(401);
    expect(refused.headers['x-served-by']).toBeUndefined();
  });

  it('are shown by GET /admin/v1/services (a credential masked) and follow gateway.yaml hot', async () => {
    const services = await admin(stack.gateway.adminUrl, 'GET', '/services');
    const categories = services.body.services.find((s: any) => s.name === 'categories');
    expect(categories.requestHeaders.set['x-api-version']).toBe('2');
    expect(categories.requestHeaders.set.authorization).toBe('***');
    expect(categories.requestHeaders.remove).toEqual(['x-debug']);
    expect(categories.responseHeaders).toEqual({
      set: { 'cache-control': 'no-store', 'x-served-by': 'tollgate-edge' },
      remove: ['server', 'X-Powered-By'],
    });

    await stack.reload(withRules('3'));
    const reply = await call(`${stack.gateway.url}/v1/categories`, { headers: bearer(key.key) });
    expect(reply.json.headers['x-api-version']).toBe('3');
  });

  it('a reload touching a field the gateway owns is refused, the rules in force stay', async () => {
    const refused = await stack.reload(
      (yaml, target) => withRules('4')(yaml, target).replace('remove: [x-debug]', 'remove: [x-debug, X-RateLimit-Remaining]'),
      'config reload refused',
    );
    expect(refused.error).toMatch(
      /^gateway\.yaml: services\.0\.requestHeaders\.remove\.1: "x-ratelimit-remaining" belongs to the gateway's x-ratelimit-\*/,
    );
    const reply = await call(`${stack.gateway.url}/v1/categories`, { headers: bearer(key.key) });
    expect(reply.json.headers['x-api-version']).toBe('3');
  });
});

describe('header rules at load', () => {
  const refusal = async (serviceRules: string) => {
    const services = `
services:
  - name: categories
    paths: [/v1/categories]
    targets: [http://127.0.0.1:9]
${serviceRules}
`;
    const dir = configCopy({ 'gateway.yaml': (t) => replacingServices(t, services) });
    const result = await runCli(['check-config', dir], {});
    expect(result.code).toBe(1);
    return result.stderr.trim();
  };

  it('check-config refuses a field the gateway owns, naming file and field (the full list: test/unit/edge-rules-config.test.ts)', async () => {
    expect(await refusal('    requestHeaders: { set: { X-Tollgate-Plan: gold } }')).toContain(
      'gateway.yaml: services.0.requestHeaders.set.X-Tollgate-Plan: "x-tollgate-plan" belongs to the gateway',
    );
  });
});

// A cached service: the stored entry stays the target's, and the rules apply when the answer is
// served, whether it came from the target or from the cache (hot, and per request: ${request.id}).
const cachedRules = (servedBy: string) => `
services:
  - name: cached
    paths: [/v1/cached]
    targets: [TARGET]
    cache: { ttlSeconds: 60, store: memory, staleIfErrorSeconds: 60, honourRequestNoCache: true }
    cors: { origins: [https://app.example] }
    responseHeaders:
      set: { x-served-by: ${servedBy}, x-answer-for: "\${request.id}" }
      remove: [server]
`;
const withCachedRules = (servedBy: string) => (yaml: string, target: string) =>
  replacingServices(yaml, cachedRules(servedBy).replaceAll('TARGET', target));

describe('header rules on answers served from the response cache', () => {
  let stack: EdgeRulesStack;
  let key: { id: string; key: string; plan: string };
  const ETAG = '"v1"';
  let answer: 'ok' | 'error' = 'ok';

  beforeAll(async () => {
    stack = await EdgeRulesStack.start(withCachedRules('edge-1'));
    stack.target.behaviour = (req, res) => {
      res.setHeader('server', 'upstream/1.0');
      if (answer === 'error') {
        res.statusCode = 503;
        return res.end('down');
      }
      res.setHeader('cache-control', 'public, max-age=60');
      res.setHeader('etag', ETAG);
      // Wider than the service's cors: allows: never passed on, from the target or from the cache.
      res.setHeader('access-control-allow-origin', '*');
      res.setHeader('access-control-allow-credentials', 'true');
      if (req.headers['if-none-match'] === ETAG) {
        res.statusCode = 304;
        return res.end();
      }
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ url: req.url }));
    };
    key = await stack.key();
  }, 120_000);
  afterAll(() => stack?.close());

  const get = (path: string, id: string, headers: Record<string, string> = {}) =>
    call(`${stack.gateway.url}${path}`, { headers: { ...bearer(key.key), 'x-request-id': id, ...headers } });
  const ruled = (reply: Awaited<ReturnType<typeof call>>, servedBy: string, id: string) => {
    expect(reply.headers.server).toBeUndefined();
    expect(reply.headers['x-served-by']).toBe(servedBy);
    expect(reply.headers['x-answer-for']).toBe(id);
  };

  it('a miss and the hits after it (200, and 304 to a conditional request) carry the same rules, filled in per request', async () => {
    const miss = await get('/v1/cached/a', 'cached-rules-01');
    expect(miss.status).toBe(200);
    expect(miss.headers['cache-status']).toMatch(/fwd=miss; stored/);
    ruled(miss, 'edge-1', 'cached-rules-01');

    const hit = await get('/v1/cached/a', 'cached-rules-02');
    expect(hit.status).toBe(200);
    expect(hit.headers['cache-status']).toBe('tollgate; hit');
    expect(hit.body).toBe(miss.body);
    ruled(hit, 'edge-1', 'cached-rules-02');

    const notModified = await get('/v1/cached/a', 'cached-rules-03', { 'if-none-match': ETAG });
    expect(notModified.status).toBe(304);
    expect(notModified.headers['cache-status']).toBe('tollgate; hit');
    ruled(notModified, 'edge-1', 'cached-rules-03');
    expect(stack.target.hits.filter((h) => h.url === '/v1/cached/a')).toHaveLength(1);
  });

  it('an entry revalidated with the target (304) and a stale-if-error answer carry them too', async () => {
    await get('/v1/cached/b', 'cached-rules-11');
    const revalidated = await get('/v1/cached/b', 'cached-rules-12', { 'cache-control': 'no-cache' });
    expect(revalidated.status).toBe(200);
    expect(revalidated.headers['cache-status']).toMatch(/fwd=request; fwd-status=304/);
    ruled(revalidated, 'edge-1', 'cached-rules-12');

    answer = 'error';
    try {
      const stale = await get('/v1/cached/b', 'cached-rules-13', { 'cache-control': 'no-cache' });
      expect(stale.status).toBe(200);
      expect(stale.headers['cache-status']).toMatch(/fwd=stale; fwd-status=503; detail=stale-if-error/);
      ruled(stale, 'edge-1', 'cached-rules-13');
    } finally {
      answer = 'ok';
    }
    expect(stack.target.hits.filter((h) => h.url === '/v1/cached/b')).toHaveLength(3);
  });

  it("where cors: applies, a hit drops the target's own Access-Control-* fields as a miss does", async () => {
    const origin = { origin: 'https://evil.example' };
    const miss = await get('/v1/cached/d', 'cached-rules-31', origin);
    const hit = await get('/v1/cached/d', 'cached-rules-32', origin);
    expect(hit.headers['cache-status']).toBe('tollgate; hit');
    for (const reply of [miss, hit]) {
      expect(reply.headers['access-control-allow-origin']).toBeUndefined();
      expect(reply.headers['access-control-allow-credentials']).toBeUndefined();
    }
    const allowed = await get('/v1/cached/d', 'cached-rules-33', { origin: 'https://app.example' });
    expect(allowed.headers['cache-status']).toBe('tollgate; hit');
    expect(allowed.headers['access-control-allow-origin']).toBe('https://app.example');
    expect(allowed.headers['access-control-allow-credentials']).toBeUndefined();
  });

  it('a reload of the rules changes what the next hit shows; the stored entry stays the same', async () => {
    const before = await get('/v1/cached/c', 'cached-rules-21');
    ruled(before, 'edge-1', 'cached-rules-21');
    await stack.reload(withCachedRules('edge-2'));
    const hit = await get('/v1/cached/c', 'cached-rules-22');
    expect(hit.headers['cache-status']).toBe('tollgate; hit');
    expect(hit.body).toBe(before.body);
    ruled(hit, 'edge-2', 'cached-rules-22');
    expect(stack.target.hits.filter((h) => h.url === '/v1/cached/c')).toHaveLength(1);
  });
});
