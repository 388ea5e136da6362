import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import type { DeprecationRule } from '../../src/config/routes-schema.js';
import type { RequestContext } from '../../src/gateway/context.js';
import { applyRouteRules } from '../../src/gateway/policies/apply-route-rules.js';
import { deprecationValue, linkValue, patternToRegExp, RouteRules, sunsetValue } from '../../src/gateway/route-rules.js';

const PETS: DeprecationRule = {
  method: 'GET',
  path: '/v1/pets/{petId}',
  deprecatedAt: '2026-01-01T00:00:00Z',
  sunsetAt: '2027-06-30T00:00:00Z',
  link: 'https://developer.example.com/deprecations/get-pet',
  sunsetLink: 'https://developer.example.com/sunset-policy',
  goneAfterSunset: false,
};
const SUNSET_MS = Date.parse('2027-06-30T00:00:00Z');

/** A context with just what the policy touches: method, url, and a response that records headers. */
function fakeCtx(method: string, url: string) {
  const headers: Record<string, string> = {};
  const res = { setHeader: (name: string, value: string) => void (headers[name] = value) } as unknown as ServerResponse;
  const ctx: RequestContext = { req: { method, url } as IncomingMessage, res, startedAtMs: 0, requestId: 'r' };
  return { ctx, headers };
}

describe('path patterns', () => {
  it('match one whole segment per {param}, and literal segments whatever their case', () => {
    const re = patternToRegExp('/v1/pets/{petId}');
    expect(re.test('/v1/pets/42')).toBe(true);
    expect(re.test('/v1/pets/abc')).toBe(true);
    expect(re.test('/v1/pets/')).toBe(false);
    expect(re.test('/v1/pets')).toBe(false);
    expect(re.test('/v1/pets/42/toys')).toBe(false);
    // Many upstreams route `/x/` as `/x`: a trailing slash must not slip past a rule.
    expect(re.test('/v1/pets/42/')).toBe(true);
    expect(re.test('/v1/pets//')).toBe(false);
    // Many upstreams route case-insensitively (Express, ASP.NET Core): `/V1/PETS/42` must not slip past either.
    expect(re.test('/V1/PETS/42')).toBe(true);
    expect(re.test('/v2/pets/42')).toBe(false);
    expect(re.test('/x/v1/pets/42')).toBe(false);
  });

  it('treat regex characters in literal segments literally', () => {
    const re = patternToRegExp('/v1/a.b/{id}/c+d');
    expect(re.test('/v1/a.b/1/c+d')).toBe(true);
    expect(re.test('/v1/aXb/1/c+d')).toBe(false);
    expect(re.test('/v1/a.b/1/ccd')).toBe(false);
  });

  it('support several parameters and the root path', () => {
    expect(patternToRegExp('/v1/{a}/x/{b}').test('/v1/1/x/2')).toBe(true);
    expect(patternToRegExp('/').test('/')).toBe(true);
    expect(patternToRegExp('/').test('/v1')).toBe(false);
  });
});

describe('header values', () => {
  it('formats Deprecation as @ and integer Unix seconds (RFC 9745)', () => {
    expect(deprecationValue(Date.parse('2026-01-01T00:00:00Z'))).toBe('@1767225600');
    expect(deprecationValue(Date.parse('2026-01-01T00:00:00.999Z'))).toBe('@1767225600');
    expect(deprecationValue(Date.parse('2026-01-01T02:00:00+02:00'))).toBe('@1767225600');
  });

  it('formats Sunset as an IMF-fixdate (RFC 8594)', () => {
    expect(sunsetValue(SUNSET_MS)).toBe('Wed, 30 Jun 2027 00:00:00 GMT');
    expect(sunsetValue(Date.parse('2027-03-05T07:08:09.500+01:00'))).toBe('Fri, 05 Mar 2027 06:08:09 GMT');
  });

  it('builds Link entries for the deprecation notice and the sunset policy', () => {
    expect(linkValue('https://d.example/notice', 'https://d.example/policy')).toBe(
      '<https://d.example/notice>; rel="deprecation"; type="text/html", <https://d.example/policy>; rel="sunset"',
    );
    expect(linkValue('https://d.example/notice')).toBe('<https://d.example/notice>; rel="deprecation"; type="text/html"');
    expect(linkValue(undefined, 'https://d.example/policy')).toBe('<https://d.example/policy>; rel="sunset"');
    expect(linkValue()).toBeUndefined();
  });

  it('percent-encodes characters that would break out of <…> or the header', () => {
    const value = linkValue('https://d.example/a b>"c<?q=x y');
    expect(value).toBe('<https://d.example/a%20b%3E%22c%3C?q=x%20y>; rel="deprecation"; type="text/html"');
  });
});

describe('RouteRules', () => {
  it('matches by method and path; a GET rule also covers HEAD', () => {
    const rules = new RouteRules([PETS]);
    expect(rules.match('GET', '/v1/pets/42')?.name).toBe('GET /v1/pets/{petId}');
    expect(rules.match('HEAD', '/v1/pets/42')?.name).toBe('GET /v1/pets/{petId}');
    expect(rules.match('POST', '/v1/pets/42')).toBeUndefined();
    expect(rules.match('GET', '/v1/categories')).toBeUndefined();
    expect(rules.size).toBe(1);
  });

  it('applies the first matching rule', () => {
    const specific: DeprecationRule = { ...PETS, path: '/v1/pets/0', sunsetAt: '2028-01-01T00:00:00Z' };
    const rules = new RouteRules([specific, PETS]);
    expect(rules.match('GET', '/v1/pets/0')?.sunsetAtMs).toBe(Date.parse('2028-01-01T00:00:00Z'));
    expect(rules.match('GET', '/v1/pets/1')?.sunsetAtMs).toBe(SUNSET_MS);
  });

  it('compiles the header values once, with no Link when no link is configured', () => {
    const rule = new RouteRules([{ ...PETS, link: undefined, sunsetLink: undefined }]).match('GET', '/v1/pets/1')!;
    expect(Object.fromEntries(rule.headers)).toEqual({ deprecation: '@1767225600', sunset: 'Wed, 30 Jun 2027 00:00:00 GMT' });
  });

  it('with no rules matches nothing', () => {
    expect(new RouteRules([]).match('GET', '/v1/pets/1')).toBeUndefined();
  });
});

describe('applyRouteRules policy (injected clock)', () => {
  it('sets Deprecation, Sunset and Link on a matching request and continues', async () => {
    const policy = applyRouteRules(
      () => new RouteRules([PETS]),
      () => SUNSET_MS - 1,
    );
    const { ctx, headers } = fakeCtx('GET', '/v1/pets/42?expand=owner');
    expect(await policy(ctx)).toBeNull();
    expect(headers).toEqual({
      deprecation: '@1767225600',
      sunset: 'Wed, 30 Jun 2027 00:00:00 GMT',
      link: '<https://developer.example.com/deprecations/get-pet>; rel="deprecation"; type="text/html", <https://developer.example.com/sunset-policy>; rel="sunset"',
    });
  });

  it('leaves other requests alone', async () => {
    const policy = applyRouteRules(() => new RouteRules([PETS]));
    for (const [method, url] of [
      ['GET', '/v1/categories'],
      ['POST', '/v1/pets/42'],
      ['GET', '/v1/pets/42/toys'],
    ] as const) {
      const { ctx, headers } = fakeCtx(method, url);
      expect(await policy(ctx)).toBeNull();
      expect(headers).toEqual({});
    }
  });

  it('keeps proxying after the sunset when goneAfterSunset is false', async () => {
    const policy = applyRouteRules(
      () => new RouteRules([PETS]),
      () => SUNSET_MS + 86_400_000,
    );
    const { ctx, headers } = fakeCtx('GET', '/v1/pets/42');
    expect(await policy(ctx)).toBeNull();
    expect(headers.sunset).toBe('Wed, 30 Jun 2027 00:00:00 GMT');
  });

  it('answers 410 route_sunset from the sunset instant on when goneAfterSunset is true, with the headers', async () => {
    let now = SUNSET_MS - 1;
    const policy = applyRouteRules(
      () => new RouteRules([{ ...PETS, goneAfterSunset: true }]),
      () => now,
    );
    expect(await policy(fakeCtx('GET', '/v1/pets/42').ctx)).toBeNull();
    now = SUNSET_MS;
    const { ctx, headers } = fakeCtx('GET', '/v1/pets/42');
    const decision = await policy(ctx);
    expect(decision).toMatchObject({ code: 'route_sunset' });
    expect((decision as { message: string }).message).toBe(
      'GET /v1/pets/{petId} passed its sunset date (Wed, 30 Jun 2027 00:00:00 GMT) and is gone. See the Link header.',
    );
    expect(headers.deprecation).toBe('@1767225600');
  });

  it('reads the rules per request, so a reload applies to the next request', async () => {
    let rules = new RouteRules([PETS]);
    const policy = applyRouteRules(() => rules);
    const first = fakeCtx('GET', '/v1/pets/1');
    await policy(first.ctx);
    expect(first.headers.sunset).toBe('Wed, 30 Jun 2027 00:00:00 GMT');
    rules = new RouteRules([{ ...PETS, sunsetAt: '2028-02-29T12:00:00Z' }]);
    const second = fakeCtx('GET', '/v1/pets/1');
    await policy(second.ctx);
    expect(second.headers.sunset).toBe('Tue, 29 Feb 2028 12:00:00 GMT');
  });
});
