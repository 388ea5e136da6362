import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EdgeStack } from '../helpers/edge-stack.js';

/**
 * RFC 9112 §3.2: Host is `uri-host [ ":" port ]`. Userinfo or a path in it would reach the
 * upstream's Host and X-Forwarded-Host, where a framework building absolute URLs from them reads
 * another host or path than the one the gateway routed (issue 23, item 4).
 */
let stack: EdgeStack;

beforeAll(async () => {
  stack = await EdgeStack.start();
});

afterAll(async () => {
  await stack?.stop();
});

const request = (host: string) =>
  stack.send([`GET /v1/categories HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${stack.key.key}\r\n\r\n`], { waitForClose: true });

describe('Host header syntax', () => {
  it.each(['user@gw.test', 'user:pw@gw.test', 'gw.test/v1/admin', 'gw.test?x=1', 'gw.test#f', 'gw.test:80/x', 'gw\\test', 'gw.test:port'])(
    'Host: %s is a 400, closed, and never reaches the upstream',
    async (host) => {
      stack.upstream.reset();
      const result = await request(host);
      expect(result.responses.map((r) => r.status)).toEqual([400]);
      expect(JSON.parse(result.responses[0]!.body)).toMatchObject({ code: 'bad_request', status: 400 });
      expect(result.closed).toBe(true);
      expect(stack.upstream.requests).toEqual([]);
    },
  );

  it.each(['gw.test', 'gw.test:8080', '127.0.0.1:80', '[::1]:8080', '[fe80::1%25eth0]', 'xn--bcher-kva.example', ''])(
    'Host: %s is forwarded as Host and X-Forwarded-Host',
    async (host) => {
      stack.upstream.reset();
      const result = await stack.send([`GET /v1/categories HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${stack.key.key}\r\n\r\n`]);
      expect(result.responses.at(-1)?.status).toBe(200);
      const seen = stack.upstream.requests.at(-1)!;
      if (host !== '') {
        expect(stack.upstream.header(seen, 'host')).toEqual([host]);
        expect(stack.upstream.header(seen, 'x-forwarded-host')).toEqual([host]);
      }
    },
  );

  it('an absolute-form target with userinfo is a 400 as well', async () => {
    stack.upstream.reset();
    const result = await stack.send([
      `GET http://user@gw.test/v1/categories HTTP/1.1\r\nHost: gw.test\r\nAuthorization: Bearer ${stack.key.key}\r\n\r\n`,
    ]);
    expect(result.responses.map((r) => r.status)).toEqual([400]);
    expect(stack.upstream.requests).toEqual([]);
  });
});
