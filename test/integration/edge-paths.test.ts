import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { EdgeStack } from '../helpers/edge-stack.js';
import { headerOf } from '../helpers/raw-client.js';

// Path confusion: route rules must match the path the upstream receives. The shipped config
// deprecates GET /v1/pets/{petId}; every spelling below reaches the upstream as /v1/pets/42 and
// must carry Deprecation/Sunset (and meet the 410 once goneAfterSunset applies).

const SPELLINGS = [
  '/v1/./pets/42',
  '/v1/x/../pets/42',
  '/v1/%2e/pets/42',
  '/v1/%2E%2e/v1/pets/42',
  '/v1//pets/42',
  '//v1/pets/42',
  '/v1/pets/%34%32',
  '/v1/pets/42/.',
  '/../v1/pets/42',
];

let stack: EdgeStack;
beforeAll(async () => {
  stack = await EdgeStack.start();
});
afterAll(async () => stack?.stop());
beforeEach(() => stack.upstream.reset());

describe('path normalisation before route rules', () => {
  it.each(SPELLINGS)('%s gets the deprecation headers and reaches the upstream as /v1/pets/42', async (target) => {
    const result = await stack.send([`GET ${target} HTTP/1.1\r\n${stack.auth}\r\n`]);
    const response = result.responses[0];
    expect(response?.status).toBe(200);
    expect(headerOf(response, 'deprecation')).toMatch(/^@\d+$/);
    expect(headerOf(response, 'sunset')).toMatch(/GMT$/);
    const expected = target.endsWith('/.') ? '/v1/pets/42/' : '/v1/pets/42';
    expect(stack.targets()).toEqual([`GET ${expected}`]);
  });

  it('absolute-form GET http://host/v1/pets/42 is routed as origin-form, with the authority as Host', async () => {
    const result = await stack.send([`GET http://api.example.test/v1/./pets/42?x=1 HTTP/1.1\r\n${stack.auth}\r\n`]);
    expect(headerOf(result.responses[0], 'deprecation')).toMatch(/^@\d+$/);
    expect(stack.targets()).toEqual(['GET /v1/pets/42?x=1']);
    expect(stack.upstream.header(stack.upstream.requests[0]!, 'host')).toEqual(['api.example.test']);
  });

  it('keeps the query string as sent', async () => {
    await stack.send([`GET /v1/pets/42?a=%2F..&b=/./ HTTP/1.1\r\n${stack.auth}\r\n`]);
    expect(stack.targets()).toEqual(['GET /v1/pets/42?a=%2F..&b=/./']);
  });

  it('logs and labels the canonical path', async () => {
    await stack.send([`GET /v1/x/../pets/77 HTTP/1.1\r\n${stack.auth}\r\n`]);
    const line = await stack.gateway.process.waitForLog('request', 60_000, (l) => l.path === '/v1/pets/77');
    expect(line.status).toBe(200);
    expect(await stack.metrics()).toMatch(/tollgate_requests_total\{route="\/v1\/pets\/\{petId\}",method="GET",status="200"\}/);
    expect(await stack.metrics()).not.toMatch(/route="[^"]*\.\./);
  });
});

describe('what cannot be normalised safely is a 400 with an Error body', () => {
  it.each([
    ['a backslash', '/v1\\pets/42'],
    ['an encoded slash', '/v1/pets%2F42'],
    ['an encoded backslash', '/v1/pets%5c42'],
    ['an encoded NUL', '/v1/pets/%00'],
    ['a path parameter', '/v1/pets;x=1/42'],
    ['a broken escape', '/v1/pets/%4'],
    ['an asterisk-form target', '*'],
    ['an absolute-form target of another scheme', 'ftp://host/v1/pets/42'],
  ])('%s (%s)', async (_name, target) => {
    const result = await stack.send([`GET ${target} HTTP/1.1\r\n${stack.auth}\r\n`]);
    const response = result.responses[0];
    expect(response?.status).toBe(400);
    expect(JSON.parse(response!.body)).toMatchObject({ code: 'bad_request', status: 400 });
    await stack.sentinel();
    expect(stack.targets()).toEqual(['GET /v1/sentinel']);
  });
});

describe('goneAfterSunset applies to every spelling', () => {
  let gone: EdgeStack;
  beforeAll(async () => {
    gone = await EdgeStack.start({
      gatewayYaml: (t) =>
        t.replace(/sunsetAt: \S+/, 'sunsetAt: 2026-01-02T00:00:00Z').replace('goneAfterSunset: false', 'goneAfterSunset: true'),
    });
  });
  afterAll(async () => gone?.stop());

  it.each(SPELLINGS)('%s answers 410 route_sunset and the upstream sees nothing', async (target) => {
    gone.upstream.reset();
    const result = await gone.send([`GET ${target} HTTP/1.1\r\n${gone.auth}\r\n`]);
    expect(result.responses[0]?.status).toBe(410);
    expect(JSON.parse(result.responses[0]!.body).code).toBe('route_sunset');
    expect(gone.targets()).toEqual([]);
  });
});
