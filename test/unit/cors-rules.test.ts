import { describe, expect, it } from 'vitest';
import { CorsRules } from '../../src/policies/cors/cors-rules.js';
import { corsSchema } from '../../src/policies/cors/cors-schema.js';

const rules = (raw: object) => new CorsRules(corsSchema.parse(raw));

describe('CORS origin matching', () => {
  const r = rules({ origins: ['https://app.example', 'https://*.example.org', 'http://*.local.test:8080'] });

  it('allows exact origins and one label under a wildcard', () => {
    for (const origin of ['https://app.example', 'https://shop.example.org', 'https://a-1.example.org', 'http://dev.local.test:8080']) {
      expect(r.allows(origin), origin).toBe(true);
    }
  });

  it('refuses everything else, lookalikes included', () => {
    for (const origin of [
      undefined,
      'null',
      'https://app.example.evil',
      'https://evilapp.example',
      'http://app.example',
      'https://app.example:8443',
      'https://example.org',
      'https://a.b.example.org',
      'https://-x.example.org',
      'https://shop.example.org.evil',
      'https://shopexample.org',
      'http://dev.local.test',
      'http://dev.local.test:80801',
      'https://app.example, https://evil.example',
      'https://APP.example',
    ]) {
      expect(r.allows(origin), String(origin)).toBe(false);
    }
  });

  it('"*" allows any origin but never "null" or a list', () => {
    const any = rules({ origins: ['*'] });
    expect(any.allows('https://whoever.example')).toBe(true);
    expect(any.allows('null')).toBe(false);
    expect(any.allows('https://a.example https://b.example')).toBe(false);
  });
});

describe('CORS answers', () => {
  it('a preflight names only the requested headers that are allowed, once each', () => {
    const r = rules({ origins: ['https://app.example'], headers: ['Authorization', 'content-type'] });
    expect(r.preflightHeaders('https://app.example', 'X-Evil, authorization,Authorization, Content-Type')).toEqual({
      'access-control-allow-origin': 'https://app.example',
      'access-control-allow-methods': 'GET, HEAD, POST, PUT, PATCH, DELETE',
      'access-control-allow-headers': 'authorization, content-type',
      'access-control-max-age': '600',
    });
  });

  it('credentials and extra exposed headers', () => {
    const r = rules({ origins: ['https://app.example'], credentials: true, exposeHeaders: ['X-Trace', 'retry-after'] });
    const headers = r.actualHeaders('https://app.example');
    expect(headers['access-control-allow-credentials']).toBe('true');
    expect(headers['access-control-expose-headers']).toMatch(/, Link, x-trace$/);
    expect(headers['access-control-expose-headers']!.match(/retry-after/gi)).toHaveLength(1);
  });
});

describe('cors schema', () => {
  const issue = (raw: object) => {
    const result = corsSchema.safeParse(raw);
    expect(result.success).toBe(false);
    const first = result.error!.issues[0]!;
    return `${first.path.join('.')}: ${first.message}`;
  };

  it('refuses "*" with credentials, "null", paths, default ports, upper case, bare wildcards, lower-case methods', () => {
    expect(issue({ origins: ['*'], credentials: true })).toMatch(/^origins\.0: "\*" is allowed only with credentials: false/);
    expect(issue({ origins: ['null'] })).toMatch(/^origins\.0: "null" is never allowed/);
    expect(issue({ origins: ['https://app.example/'] })).toMatch(/^origins\.0: must be an origin/);
    expect(issue({ origins: ['http://app.example:80'] })).toMatch(/^origins\.0: leave out the default port/);
    expect(issue({ origins: ['https://App.example'] })).toMatch(/^origins\.0: must be an origin/);
    expect(issue({ origins: ['https://*.org'] })).toMatch(/^origins\.0: "\*\." must be followed/);
    expect(issue({ origins: ['https://*.*.example.org'] })).toMatch(/^origins\.0: must be an origin/);
    expect(issue({ origins: ['https://a.example'], methods: ['get'] })).toMatch(/^methods\.0: must be upper case/);
    expect(issue({ origins: [] })).toMatch(/^origins: at least one origin/);
  });
});
