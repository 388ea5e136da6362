import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin } from '../helpers/admin-client.js';
import { lineOf } from '../helpers/config-lines.js';
import { call, EdgeRulesStack, listeningOn, replacingServices } from '../helpers/edge-rules-stack.js';
import { REPO_ROOT, runCli } from '../helpers/processes.js';
import { bearer, configCopy } from '../helpers/stack.js';

// Requests checked against OpenAPI documents (docs/policies.md, "OpenAPI validation"), on a real
// gateway listening on ::1: the repository's openapi.yaml (3.1) and the Swagger Petstore 3.0
// document of @readme/oas-examples (written elsewhere), over a corpus of valid and invalid
// requests. Invalid requests are charged and never reach the target; valid ones reach it with
// their body intact.

const PETSTORE = createRequire(import.meta.url).resolve('@readme/oas-examples/3.0/json/petstore.json');

const services = (petstoreMode: string) => `
services:
  - name: categories
    paths: [/v1/categories, /v1/pets, /v1/store]
    targets: [TARGET]
    validate: { openapi: api.yaml }
  - name: petstore
    paths: [/v2]
    targets: [TARGET]
    validate: { openapi: petstore.json, mode: ${petstoreMode}, maxBodyBytes: 2048 }
`;
const config = (mode: string) => (yaml: string, target: string) =>
  replacingServices(listeningOn(yaml, '::1'), services(mode).replaceAll('TARGET', target));

interface Case {
  method: string;
  path: string;
  body?: string;
  contentType?: string;
  headers?: Record<string, string>;
  /** The status the gateway answers; 200: forwarded. */
  status: number;
  /** For a 400: the issues expected, as `in pointer` prefixes. */
  issues?: string[];
}

const json = 'application/json';
const CORPUS: Case[] = [
  // The repository's openapi.yaml (OpenAPI 3.1).
  { method: 'GET', path: '/v1/categories', status: 200 },
  { method: 'POST', path: '/v1/categories', body: '{"name":"Dog","description":"good"}', contentType: json, status: 200 },
  { method: 'POST', path: '/v1/categories', body: '{"name":"Dog"}', contentType: 'application/json; charset=utf-8', status: 200 },
  { method: 'POST', path: '/v1/categories', body: '{}', contentType: json, status: 400, issues: ['body /name'] },
  { method: 'POST', path: '/v1/categories', body: '{"name":"  "}', contentType: json, status: 400, issues: ['body /name'] },
  { method: 'POST', path: '/v1/categories', body: '{"name":"x","id":4}', contentType: json, status: 400, issues: ['body '] },
  { method: 'POST', path: '/v1/categories', body: '{"name":', contentType: json, status: 400, issues: ['body '] },
  { method: 'POST', path: '/v1/categories', body: 'name=Dog', contentType: 'application/x-www-form-urlencoded', status: 415 },
  { method: 'POST', path: '/v1/categories', status: 400, issues: ['body '] },
  { method: 'OPTIONS', path: '/v1/categories', status: 405 },
  { method: 'GET', path: '/v1/pets/42', status: 200 },
  { method: 'GET', path: '/v1/pets/forty-two', status: 400, issues: ['path /petId'] },
  { method: 'GET', path: '/v1/pets/42/toys', status: 404 },
  { method: 'GET', path: '/v1/store/orders', status: 200 },
  // The Swagger Petstore (OpenAPI 3.0) of @readme/oas-examples.
  { method: 'GET', path: '/v2/pet/findByStatus?status=available', status: 200 },
  { method: 'GET', path: '/v2/pet/findByStatus?status=available&status=sold', status: 200 },
  { method: 'GET', path: '/v2/pet/findByStatus?status=lost', status: 400, issues: ['query /status/0'] },
  { method: 'GET', path: '/v2/pet/findByStatus', status: 400, issues: ['query /status'] },
  { method: 'GET', path: '/v2/pet/7', status: 200 },
  { method: 'GET', path: '/v2/pet/seven', status: 400, issues: ['path /petId'] },
  { method: 'PATCH', path: '/v2/pet/7', status: 405 },
  { method: 'GET', path: '/v2/pets', status: 404 },
  {
    method: 'POST',
    path: '/v2/pet',
    body: '{"name":"doggie","photoUrls":["https://example.com/a.png"],"status":"available"}',
    contentType: json,
    status: 200,
  },
  { method: 'POST', path: '/v2/pet', body: '<pet><name>doggie</name></pet>', contentType: 'application/xml', status: 200 },
  {
    method: 'POST',
    path: '/v2/pet',
    body: '{"name":7,"status":"lost"}',
    contentType: json,
    status: 400,
    issues: ['body /photoUrls', 'body /name', 'body /status'],
  },
  { method: 'POST', path: '/v2/pet', body: '{"name":"x"}', contentType: 'text/plain', status: 415 },
  {
    method: 'POST',
    path: '/v2/store/order',
    body: '{"petId":1,"quantity":2,"shipDate":"2026-01-01T00:00:00Z","status":"placed"}',
    contentType: json,
    status: 200,
  },
  {
    method: 'POST',
    path: '/v2/store/order',
    body: '{"petId":"one","shipDate":"yesterday"}',
    contentType: json,
    status: 400,
    issues: ['body /petId', 'body /shipDate'],
  },
  { method: 'GET', path: '/v2/user/login?username=a&password=b', status: 200 },
  { method: 'GET', path: '/v2/user/login?username=a', status: 400, issues: ['query /password'] },
  { method: 'DELETE', path: '/v2/pet/7', headers: { api_key: 'abc' }, status: 200 },
  {
    method: 'POST',
    path: '/v2/user/createWithArray',
    body: '[{"username":"a"},{"id":"x"}]',
    contentType: json,
    status: 400,
    issues: ['body /1/id'],
  },
];

describe('OpenAPI validation (gateway on ::1)', () => {
  let stack: EdgeRulesStack;
  let key: string;
  let keyId: string;

  beforeAll(async () => {
    stack = await EdgeRulesStack.start(
      config('enforce'),
      {},
      { 'api.yaml': readFileSync(join(REPO_ROOT, 'openapi.yaml'), 'utf8'), 'petstore.json': readFileSync(PETSTORE, 'utf8') },
    );
    const created = await stack.key(['--plan', 'enterprise', '--per-minute', '100000', '--per-day', '1000000']);
    key = created.key;
    keyId = created.id;
  }, 120_000);
  afterAll(() => stack?.close());

  it('serves a corpus of valid and invalid requests as the documents say', async () => {
    for (const c of CORPUS) {
      const hitsBefore = stack.target.hits.length;
      const headers: Record<string, string> = { ...bearer(key), ...c.headers };
      if (c.contentType) headers['content-type'] = c.contentType;
      const what0 = `${c.method} ${c.path}`;
      const reply = await call(`${stack.gateway.url}${c.path}`, { method: c.method, headers, body: c.body }).catch((err: Error) => {
        throw new Error(`${what0}: ${err.message}\n${stack.gateway.process.outputTail()}`);
      });
      const what = `${c.method} ${c.path} ${c.body ?? ''}`;
      expect(reply.status, `${what}: ${reply.body}`).toBe(c.status);
      if (c.status === 200) {
        // Forwarded once, body intact.
        expect(stack.target.hits.length - hitsBefore, what).toBe(1);
        expect(stack.target.hits.at(-1)!.body, what).toBe(c.body ?? '');
        continue;
      }
      expect(stack.target.hits.length, what).toBe(hitsBefore);
      expect(reply.json.status).toBe(c.status);
      // Charged: the rate-limit fields of the consumed quota are on every refusal.
      expect(reply.headers['x-ratelimit-remaining'], what).toBeDefined();
      if (c.status === 405) expect(reply.headers.allow, what).toMatch(/GET/);
      if (c.status === 400) {
        expect(reply.json.code).toBe('request_invalid');
        const got = (reply.json.errors as Array<{ in: string; pointer: string }>).map((e) => `${e.in} ${e.pointer}`);
        for (const issue of c.issues ?? [])
          expect(
            got.some((g) => g.startsWith(issue)),
            `${what}: ${JSON.stringify(reply.json.errors)}`,
          ).toBe(true);
        expect(reply.json.errors.length).toBeLessThanOrEqual(10);
      }
    }
  });

  it('bounds the error list, reads at most maxBodyBytes, and forwards a chunked body it read', async () => {
    const many = JSON.stringify(Array.from({ length: 30 }, () => ({ id: 'x' })));
    const reply = await call(`${stack.gateway.url}/v2/user/createWithArray`, {
      method: 'POST',
      headers: { ...bearer(key), 'content-type': json },
      body: many,
    });
    expect(reply.status).toBe(400);
    expect(reply.json.errors).toHaveLength(10);
    const big = JSON.stringify({ name: 'x'.repeat(3000), photoUrls: [] });
    const tooBig = await call(`${stack.gateway.url}/v2/pet`, {
      method: 'POST',
      headers: { ...bearer(key), 'content-type': json },
      body: big,
    });
    expect(tooBig.status).toBe(413);
    const hits = stack.target.hits.length;
    const chunked = await call(`${stack.gateway.url}/v2/pet`, {
      method: 'POST',
      headers: { ...bearer(key), 'content-type': json, 'transfer-encoding': 'chunked' },
      body: '{"name":"doggie","photoUrls":[]}',
    });
    expect(chunked.status).toBe(200);
    expect(stack.target.hits.length).toBe(hits + 1);
    expect(stack.target.hits.at(-1)!.body).toBe('{"name":"doggie","photoUrls":[]}');
  });

  it('invalid requests are charged (they consume quota like any other)', async () => {
    const usage = async () => (await admin(stack.gateway.adminUrl, 'GET', `/keys/${keyId}/usage`)).body.minute.used as number;
    const before = await usage();
    for (let i = 0; i < 3; i++) await call(`${stack.gateway.url}/v2/pet/seven`, { headers: bearer(key) });
    expect((await usage()) - before).toBe(3);
    expect(await stack.metric('tollgate_request_validations_total', { service: 'petstore', result: 'refused' })).toBeGreaterThan(3);
  });

  it('shadow mode forwards what it would refuse, logs and counts it; shown by GET /admin/v1/services; hot', async () => {
    await stack.reload(config('shadow'));
    const services = await admin(stack.gateway.adminUrl, 'GET', '/services');
    expect(services.body.services.find((s: any) => s.name === 'petstore').validate).toEqual({
      openapi: 'petstore.json',
      mode: 'shadow',
      maxBodyBytes: 2048,
    });
    const hits = stack.target.hits.length;
    const reply = await call(`${stack.gateway.url}/v2/pet/seven`, { headers: { ...bearer(key), 'x-request-id': 'shadow-check-0001' } });
    expect(reply.status).toBe(200);
    expect(stack.target.hits.length).toBe(hits + 1);
    expect(await stack.metric('tollgate_request_validations_total', { service: 'petstore', result: 'shadow_refused' })).toBe(1);
    const shadowLine = () => stack.gateway.process.logs().find((l) => l.reqId === 'shadow-check-0001' && l.code === 'request_invalid');
    for (let i = 0; i < 200 && !shadowLine(); i++) await new Promise((resolve) => setTimeout(resolve, 50));
    const line = shadowLine();
    expect(line?.errors).toEqual([{ in: 'path', pointer: '/petId', message: 'must be integer' }]);
  });

  it('a reload naming a broken document is refused, naming the file and the JSON pointer', async () => {
    writeFileSync(
      join(stack.configDir, 'broken.yaml'),
      'openapi: 3.1.0\ninfo: { title: t, version: "1" }\npaths:\n  /things:\n    post:\n      requestBody:\n        content:\n          application/json:\n            schema: { $ref: "#/components/schemas/Missing" }\n',
    );
    const broken = (yaml: string, target: string) => config('enforce')(yaml, target).replace('openapi: api.yaml', 'openapi: broken.yaml');
    const refused = await stack.reload(broken, 'config reload refused');
    expect(refused.error).toBe(
      "gateway.yaml: services.0.validate.openapi: broken.yaml: /paths/~1things/post/requestBody/content/application~1json/schema: schema does not compile: can't resolve reference #/components/schemas/Missing from id openapi:document" +
        ` (line ${lineOf(broken(stack.shipped, stack.target.url), 'openapi: broken.yaml')})`,
    );
  });
});

/** A config directory whose one service validates against `openapi`, with `files` beside gateway.yaml. */
function validatingConfig(openapi: string, files: Record<string, string>): string {
  const dir = configCopy({
    'gateway.yaml': (t) =>
      replacingServices(
        t,
        `services:\n  - name: api\n    paths: [/v1]\n    targets: [http://127.0.0.1:9]\n    validate: { openapi: ${openapi} }\n`,
      ),
  });
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

describe('OpenAPI validation at load', () => {
  it('check-config refuses a document that is not OpenAPI 3.x, naming the pointer', async () => {
    const dir = validatingConfig('swagger.json', { 'swagger.json': JSON.stringify({ swagger: '2.0', paths: {} }) });
    const result = await runCli(['check-config', dir], {});
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      'gateway.yaml: services.0.validate.openapi: swagger.json: /openapi: must be an OpenAPI 3.0.x or 3.1.x document',
    );
  });

  it('check-config refuses a document that does not match the OpenAPI schema, naming the file and the pointer', async () => {
    const dir = validatingConfig('api.yaml', {
      'api.yaml': 'openapi: 3.1.0\ninfo: { title: t, version: "1" }\npaths:\n  /pets:\n    get:\n      responses: 7\n',
    });
    const result = await runCli(['check-config', dir], {});
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      'gateway.yaml: services.0.validate.openapi: api.yaml: /paths/~1pets/get/responses: does not match the OpenAPI 3.1 schema: must be object',
    );
  });

  it('check-config follows $refs into other files, and names a missing one', async () => {
    const dir = validatingConfig('api.yaml', {
      'api.yaml': 'openapi: 3.1.0\ninfo: { title: t, version: "1" }\npaths:\n  /pets:\n    $ref: pets.yaml\n',
      'pets.yaml': 'get:\n  responses: { "200": { $ref: "responses.yaml#/ok" } }\n',
    });
    const missing = await runCli(['check-config', dir], {});
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('api.yaml: /paths/~1pets/get/responses/200/$ref: in pets.yaml: cannot load responses.yaml: ENOENT');
    writeFileSync(join(dir, 'responses.yaml'), 'ok: { description: fine }\n');
    const ok = await runCli(['check-config', dir], {});
    expect(ok.stderr).toBe('');
    expect(ok.code).toBe(0);
  });

  it('check-config names every unusable document, each at the line of its service', async () => {
    const services =
      'services:\n' +
      '  - { name: one, paths: [/v1/one], targets: [http://127.0.0.1:9], validate: { openapi: one.yaml } }\n' +
      '  - { name: two, paths: [/v1/two], targets: [http://127.0.0.1:9], validate: { openapi: two.yaml } }\n';
    const dir = configCopy({ 'gateway.yaml': (t) => replacingServices(t, services) });
    writeFileSync(join(dir, 'one.yaml'), 'openapi: 3.1.0\ninfo: { title: t, version: "1" }\npaths:\n  /a:\n    get:\n      responses: 7\n');
    writeFileSync(join(dir, 'two.yaml'), 'openapi: 3.0.3\npaths: {}\n');
    const result = await runCli(['check-config', dir], {});
    expect(result.code).toBe(1);
    const text = readFileSync(join(dir, 'gateway.yaml'), 'utf8');
    expect(result.stderr.trimEnd().split('\n')).toEqual([
      `tollgate: gateway.yaml: services.0.validate.openapi: one.yaml: /paths/~1a/get/responses: does not match the OpenAPI 3.1 schema: must be object (line ${lineOf(text, 'openapi: one.yaml')})`,
      `gateway.yaml: services.1.validate.openapi: two.yaml: (document): does not match the OpenAPI 3.0 schema: must have required property 'info' (line ${lineOf(text, 'openapi: two.yaml')})`,
    ]);
  });
});
