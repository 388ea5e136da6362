import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../harness/tollgate.js';
import { call, EdgeRulesStack, replacingServices } from '../helpers/edge-rules-stack.js';
import { pollUntil } from '../helpers/poll.js';
import { runCli } from '../helpers/processes.js';
import { bearer, configCopy, withLeases } from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// The user's own policies against real processes (docs/plugins.md): one test-only policy per
// phase (test/fixtures/policies/), configured in gateway.yaml, each contained.

const FIXTURES = join(REPO_ROOT, 'test/fixtures/policies');

const policies = (value: string, extra = '') => `policies:
  - use: ${FIXTURES}/access-refuse-cost.js
  - use: ${FIXTURES}/headers-and-answer.js
    options: { value: "${value}" }
  - use: ${FIXTURES}/faulty.js
    budgetMs: 300
${extra}`;
// Leases off: these tests read X-RateLimit-Remaining to the unit after each request, which is the
// no-lease path's promise; with a lease out, a Redis-decided answer under-reports by its units
// (docs/quota-leases.md), and whether the key turns hot depends on the machine's speed.
const withPolicies = (value: string, extra?: string) => (yaml: string) =>
  withLeases(false)(yaml.replace(/^policies: \[\][^\n]*\n/m, policies(value, extra)));

describe('user policies, one per phase', () => {
  let stack: EdgeRulesStack;
  const key = (perDay = 1000) => stack.key(['--plan', 'enterprise', '--per-minute', String(perDay), '--per-day', String(perDay)]);

  beforeAll(async () => {
    stack = await EdgeRulesStack.start(withPolicies('v1'));
    stack.target.behaviour = (req, res) => {
      res.statusCode = Number(req.headers['x-status'] ?? 200);
      res.setHeader('x-upstream-secret', 'hidden');
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ headers: req.headers }));
    };
  }, 120_000);
  afterAll(() => stack?.close());

  it('access refuses with the Error body it declared, before any quota is charged or the target reached', async () => {
    await awayFromDayEdge();
    const { key: secret } = await key();
    const hits = stack.target.hits.length;
    const refused = await call(`${stack.gateway.url}/v1/categories`, { headers: { ...bearer(secret), 'x-refuse': '1' } });
    expect(refused.status).toBe(403);
    expect(refused.json).toEqual({ code: 'test_refused', message: 'Refused by the test policy.', status: 403 });
    expect(refused.headers['x-refused-by']).toBe('test-access');
    expect(stack.target.hits.length).toBe(hits);
    const admitted = await call(`${stack.gateway.url}/v1/categories`, { headers: bearer(secret) });
    expect(admitted.status).toBe(200);
    expect(admitted.headers['x-ratelimit-remaining']).toBe('999');
  });

  it('an added cost is charged exactly, in the one quota decision', async () => {
    await awayFromDayEdge();
    const { key: secret } = await key();
    const costly = await call(`${stack.gateway.url}/v1/categories`, { headers: { ...bearer(secret), 'x-add-cost': '4' } });
    expect(costly.status).toBe(200);
    expect(costly.headers['x-ratelimit-remaining']).toBe('995');
    const plain = await call(`${stack.gateway.url}/v1/categories`, { headers: bearer(secret) });
    expect(plain.headers['x-ratelimit-remaining']).toBe('994');
    // More than is left: refused whole, nothing charged.
    const over = await call(`${stack.gateway.url}/v1/categories`, { headers: { ...bearer(secret), 'x-add-cost': '5000' } });
    expect(over.status).toBe(429);
    const after = await call(`${stack.gateway.url}/v1/categories`, { headers: bearer(secret) });
    expect(after.headers['x-ratelimit-remaining']).toBe('993');
  });

  it('changes request fields before the forward and response fields on the relayed head, never seeing the credential', async () => {
    const created = await stack.key(['--plan', 'enterprise', '--scope', 'categories:read', '--scope', 'categories:write']);
    const reply = await call(`${stack.gateway.url}/v1/categories`, {
      headers: { ...bearer(created.key), 'x-drop-me': '1', cookie: 'a=b' },
    });
    expect(reply.status).toBe(200);
    const seen = reply.json.headers;
    expect(seen['x-policy-value']).toBe('v1');
    expect(seen['x-policy-consumer']).toBe(`${created.id}/enterprise/default/categories:read+categories:write/false`);
    expect(seen['x-drop-me']).toBeUndefined();
    const visible: string[] = seen['x-policy-saw'].split(',');
    expect(visible).toContain('x-request-id');
    expect(visible).toContain('x-tollgate-consumer-id');
    for (const hidden of ['authorization', 'cookie', 'x-tollgate-assertion']) expect(visible).not.toContain(hidden);
    expect(reply.headers['x-policy-status']).toBe('200');
    expect(reply.headers['x-upstream-secret']).toBeUndefined();
    // The gateway's own Error bodies are not relayed heads.
    const refused = await call(`${stack.gateway.url}/v1/categories`, { headers: { ...bearer(created.key), 'x-refuse': '1' } });
    expect(refused.headers['x-policy-status']).toBeUndefined();
  });

  it('after the answer, a hook sees the final status, without delaying the client', async () => {
    const created = await key();
    const reply = await call(`${stack.gateway.url}/v1/categories/none`, { headers: { ...bearer(created.key), 'x-status': '404' } });
    expect(reply.status).toBe(404);
    const line = await pollUntil(
      async () =>
        stack.gateway.process.logs().find((l) => l.msg === 'test policy saw the answer' && l.reqId === reply.headers['x-request-id']),
      (found) => found !== undefined,
      { deadline: Date.now() + 15_000 },
    );
    expect(line).toMatchObject({ policy: 'test-headers', status: 404, path: '/v1/categories/none' });
    expect(JSON.stringify(line)).not.toContain(created.key);
    const counted = await pollUntil(
      () => stack.metric('tollgate_policy_events_total', { policy: 'test-headers', event: 'answered' }),
      (n) => n >= 1,
      { deadline: Date.now() + 15_000 },
    );
    expect(counted).toBeGreaterThanOrEqual(1);
  });

  it("a hook that throws or rejects is that request's single 500, counted by policy and phase", async () => {
    const { key: secret } = await key();
    const [thrown, rejected, neighbour] = await Promise.all([
      call(`${stack.gateway.url}/v1/categories`, { headers: { ...bearer(secret), 'x-policy-fault': 'throw' } }),
      call(`${stack.gateway.url}/v1/categories`, { headers: { ...bearer(secret), 'x-policy-fault': 'reject' } }),
      call(`${stack.gateway.url}/v1/categories`, { headers: bearer(secret) }),
    ]);
    for (const reply of [thrown, rejected])
      expect(reply.json).toEqual({ code: 'internal_error', message: expect.any(String), status: 500 });
    expect(neighbour.status).toBe(200);
    expect(await stack.metric('tollgate_policy_faults_total', { policy: 'test-faulty', phase: 'beforeForward' })).toBe(1);
    expect(await stack.metric('tollgate_policy_faults_total', { policy: 'test-faulty', phase: 'access' })).toBe(1);
  });

  it('a hook past its budget is abandoned with 503 policy_timeout, counted, while other requests pass', async () => {
    const { key: secret } = await key();
    const slow = call(`${stack.gateway.url}/v1/categories`, { headers: { ...bearer(secret), 'x-policy-fault': 'hang' } });
    const neighbour = await call(`${stack.gateway.url}/v1/categories`, { headers: bearer(secret) });
    expect(neighbour.status).toBe(200);
    const abandoned = await slow;
    expect(abandoned.json).toEqual({ code: 'policy_timeout', message: expect.any(String), status: 503 });
    expect(await stack.metric('tollgate_policy_timeouts_total', { policy: 'test-faulty', phase: 'access' })).toBe(1);
  });

  it('a policy may not change a field the gateway owns, nor refuse with a code it did not declare', async () => {
    const { key: secret } = await key();
    for (const fault of ['owned', 'owned-refusal', 'undeclared']) {
      const reply = await call(`${stack.gateway.url}/v1/categories`, { headers: { ...bearer(secret), 'x-policy-fault': fault } });
      expect(reply.json, fault).toEqual({ code: 'internal_error', message: expect.any(String), status: 500 });
    }
  });

  it('options reload hot; bad options and code not loaded at start are refused, naming file and field', async () => {
    await stack.reload(withPolicies('v2'));
    const { key: secret } = await key();
    const reply = await call(`${stack.gateway.url}/v1/categories`, { headers: bearer(secret) });
    expect(reply.json.headers['x-policy-value']).toBe('v2');

    const bad = await stack.reload(withPolicies(''), 'config reload refused');
    expect(JSON.stringify(bad)).toContain('gateway.yaml: policies.1.options.value');
    const added = await stack.reload(withPolicies('v3', `  - use: ${FIXTURES}/other-policy.js\n`), 'config reload refused');
    expect(JSON.stringify(added)).toContain('was not loaded at start');
    const still = await call(`${stack.gateway.url}/v1/categories`, { headers: bearer(secret) });
    expect(still.json.headers['x-policy-value']).toBe('v2');
  });
});

describe('check-config and user policies', () => {
  const check = (yaml: string) =>
    runCli(['check-config', configCopy({ 'gateway.yaml': (text) => text.replace(/^policies: \[\][^\n]*\n/m, yaml) })], {});

  it('loads the code and checks the options against its schema', async () => {
    const ok = await check(`policies:\n  - use: ${FIXTURES}/headers-and-answer.js\n    options: { value: x }\n`);
    expect(ok.code, ok.stderr).toBe(0);
    const bad = await check(`policies:\n  - use: ${FIXTURES}/headers-and-answer.js\n    options: { value: x, typo: 1 }\n`);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('gateway.yaml: policies.0.options');
    expect(bad.stderr).toContain('typo');
    const zod = await check(`policies:\n  - use: ${FIXTURES}/access-refuse-cost.js\n    options: { refuseHeader: 7 }\n`);
    expect(zod.stderr).toContain('gateway.yaml: policies.0.options.refuseHeader');
    // A TypeScript file as it is (Node's type stripping), as in the tutorial.
    const typed = await check(`policies:\n  - use: ${FIXTURES}/typed.ts\n`);
    expect(typed.code, typed.stderr).toBe(0);
    const missing = await check(`policies:\n  - use: ./policies/none.js\n`);
    expect(missing.stderr).toContain('gateway.yaml: policies.0.use');
  });
});

describe('user policies per service and per route', () => {
  let stack: EdgeRulesStack;
  let secret: string;

  beforeAll(async () => {
    stack = await EdgeRulesStack.start((yaml, target) =>
      replacingServices(
        yaml,
        `services:
  - name: categories
    paths: [/v1/categories]
    targets: [${target}]
    policies:
      - use: ${FIXTURES}/access-refuse-cost.js
        options: { refuseHeader: x-service-refuse }
        routes: [{ method: GET, path: "/v1/categories/{id}" }]
`,
      ),
    );
    secret = (await stack.key()).key;
  }, 120_000);
  afterAll(() => stack?.close());

  it("runs a service's policy only on its service's paths, and only on the routes it names", async () => {
    const refuse = { ...bearer(secret), 'x-service-refuse': '1' };
    expect((await call(`${stack.gateway.url}/v1/categories/7`, { headers: refuse })).json?.code).toBe('test_refused');
    // Another method, another route of the service, another service: not this entry's.
    expect((await call(`${stack.gateway.url}/v1/categories/7`, { method: 'DELETE', headers: refuse })).status).not.toBe(403);
    expect((await call(`${stack.gateway.url}/v1/categories`, { headers: refuse })).status).toBe(200);
    expect((await call(`${stack.gateway.url}/v1/pets`, { headers: refuse })).status).not.toBe(403);
  });
});
