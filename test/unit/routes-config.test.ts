import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/config-error.js';
import { gatewayFileSchema } from '../../src/config/gateway-schema.js';
import { loadGatewayFile } from '../../src/config/load.js';
import { patternProblem } from '../../src/config/routes-schema.js';
import { RouteCosts } from '../../src/gateway/route-costs.js';
import { CONFIG_DIR } from '../helpers/processes.js';

// The `routes` section of gateway.yaml: one fixture directory per refusal, each naming file and field.

const fixture = (name: string) => fileURLToPath(new URL(`../fixtures/config-routes-${name}`, import.meta.url));

function refusal(dir: string): ConfigError {
  try {
    loadGatewayFile(dir);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error(`${dir} was accepted`);
}

const rule = { method: 'GET', path: '/v1/pets/{petId}', deprecatedAt: '2026-01-01T00:00:00Z', sunsetAt: '2027-06-30T00:00:00Z' };
const parseRules = (...deprecations: object[]) => gatewayFileSchema.safeParse({ routes: { deprecations } });
const firstIssue = (...deprecations: object[]) => {
  const result = parseRules(...deprecations);
  expect(result.success).toBe(false);
  const issue = result.error!.issues[0]!;
  return { field: issue.path.join('.'), message: issue.message };
};

describe('shipped gateway.yaml', () => {
  it('deprecates GET /v1/pets/{petId} with dates and links', () => {
    const { routes } = loadGatewayFile(CONFIG_DIR);
    expect(routes.deprecations).toHaveLength(1);
    const [pets] = routes.deprecations;
    expect(pets).toMatchObject({ method: 'GET', path: '/v1/pets/{petId}', goneAfterSunset: false });
    expect(Date.parse(pets!.sunsetAt)).toBeGreaterThanOrEqual(Date.parse(pets!.deprecatedAt));
    expect(pets!.link).toMatch(/^https:\/\//);
  });

  it('has no deprecations by default', () => {
    expect(gatewayFileSchema.parse({}).routes.deprecations).toEqual([]);
  });
});

describe('fixtures refused with file and field named', () => {
  const cases: Array<[string, string, RegExp]> = [
    ['sunset-before-deprecation', 'routes.deprecations.0.sunsetAt', /not be earlier than deprecatedAt/],
    ['malformed-date', 'routes.deprecations.0.deprecatedAt', /ISO 8601/],
    ['date-without-zone', 'routes.deprecations.0.sunsetAt', /time zone/],
    ['missing-sunset', 'routes.deprecations.0.sunsetAt', /required/],
    ['malformed-pattern', 'routes.deprecations.0.path', /\{petId/],
    ['bad-method', 'routes.deprecations.0.method', /GET/],
    ['duplicate-rule', 'routes.deprecations.1.path', /deprecations\.0/],
    ['unknown-field', 'routes.deprecations.0', /goneAfterSunet/],
    ['bad-link', 'routes.deprecations.0.link', /http/],
    ['bad-cost', 'routes.costs.0.cost', /at least 1/],
  ];
  for (const [name, field, reason] of cases) {
    it(name, () => {
      const err = refusal(fixture(name));
      expect(err.file).toBe('gateway.yaml');
      expect(err.field).toBe(field);
      expect(err.reason).toMatch(reason);
    });
  }
});

describe('path patterns', () => {
  it('accepts full paths with whole-segment {parameters}', () => {
    for (const ok of ['/', '/v1/pets/{petId}', '/v1/{a}/x/{b_2}', "/v1/a.b~c-d_e/:x@y!$&'()*+,;=%20"])
      expect(patternProblem(ok), ok).toBeNull();
  });

  it('refuses anything else, saying why', () => {
    const cases: Array<[string, RegExp]> = [
      ['v1/pets/{petId}', /start with "\/"/],
      ['', /start with "\/"/],
      ['/v1//pets', /empty segment/],
      ['/v1/pets/', /empty segment/],
      ['/v1/{a}/{a}', /\{a\} twice/],
      ['/v1/pets/{petId', /"\{petId"/],
      ['/v1/x{id}', /"x\{id\}"/],
      ['/v1/{1st}', /"\{1st\}"/],
      ['/v1/{}', /"\{\}"/],
      ['/v1/pe ts', /"pe ts"/],
      ['/v1/pets?x=1', /"pets\?x=1"/],
      ['/v1/pets#top', /"pets#top"/],
      [`/${'a'.repeat(600)}`, /512/],
    ];
    for (const [bad, reason] of cases) expect(patternProblem(bad), bad).toMatch(reason);
  });
});

describe('rule validation', () => {
  it('accepts a sunset equal to the deprecation, and compares instants across time zones', () => {
    expect(parseRules({ ...rule, sunsetAt: rule.deprecatedAt }).success).toBe(true);
    expect(parseRules({ ...rule, deprecatedAt: '2026-01-01T02:00:00+02:00', sunsetAt: '2026-01-01T00:00:00Z' }).success).toBe(true);
    expect(firstIssue({ ...rule, deprecatedAt: '2026-01-01T00:00:00Z', sunsetAt: '2026-01-01T01:00:00+02:00' })).toEqual({
      field: 'routes.deprecations.0.sunsetAt',
      message: 'must not be earlier than deprecatedAt',
    });
  });

  it('refuses impossible calendar dates and accepts leap days', () => {
    expect(firstIssue({ ...rule, sunsetAt: '2027-02-29T00:00:00Z' }).field).toBe('routes.deprecations.0.sunsetAt');
    expect(firstIssue({ ...rule, sunsetAt: '2027-04-31T00:00:00Z' }).field).toBe('routes.deprecations.0.sunsetAt');
    expect(firstIssue({ ...rule, sunsetAt: '2027-06-30T24:00:00Z' }).field).toBe('routes.deprecations.0.sunsetAt');
    expect(parseRules({ ...rule, sunsetAt: '2028-02-29T00:00:00Z' }).success).toBe(true);
  });

  it('refuses dates that are not strings, lower-case methods and non-boolean goneAfterSunset', () => {
    expect(firstIssue({ ...rule, deprecatedAt: 1767225600 }).field).toBe('routes.deprecations.0.deprecatedAt');
    expect(firstIssue({ ...rule, method: 'get' }).field).toBe('routes.deprecations.0.method');
    expect(firstIssue({ ...rule, goneAfterSunset: 'yes' }).field).toBe('routes.deprecations.0.goneAfterSunset');
  });

  it('defaults goneAfterSunset to false and leaves links optional', () => {
    const parsed = parseRules(rule);
    expect(parsed.success && parsed.data.routes.deprecations[0]).toEqual({ ...rule, goneAfterSunset: false });
  });

  it('refuses an unknown key in the routes section', () => {
    expect(gatewayFileSchema.safeParse({ routes: { deprecation: [] } }).error?.issues[0]?.message).toMatch(/deprecation/);
  });
});

describe('route costs', () => {
  const parseCosts = (...costs: object[]) => gatewayFileSchema.safeParse({ routes: { costs } });
  const issueOf = (...costs: object[]) => {
    const result = parseCosts(...costs);
    expect(result.success).toBe(false);
    const issue = result.error!.issues[0]!;
    return { field: issue.path.join('.'), message: issue.message };
  };

  it('default to none, and accept whole costs from 1 to 10000 on the deprecation path patterns', () => {
    expect(gatewayFileSchema.parse({}).routes.costs).toEqual([]);
    expect(
      parseCosts({ method: 'POST', path: '/v1/categories', cost: 5 }, { method: 'GET', path: '/v1/search/{kind}', cost: 10_000 }).success,
    ).toBe(true);
  });

  it('refuse costs that are not whole numbers in range, bad patterns and duplicates, naming the field', () => {
    expect(issueOf({ method: 'GET', path: '/v1/x', cost: 1.5 })).toEqual({
      field: 'routes.costs.0.cost',
      message: 'must be a whole number',
    });
    expect(issueOf({ method: 'GET', path: '/v1/x', cost: 10_001 })).toEqual({
      field: 'routes.costs.0.cost',
      message: 'must be at most 10000',
    });
    expect(issueOf({ method: 'GET', path: 'v1/x', cost: 2 }).field).toBe('routes.costs.0.path');
    expect(issueOf({ method: 'GET', path: '/v1/x/{a}', cost: 2 }, { method: 'GET', path: '/v1/x/{b}', cost: 3 })).toEqual({
      field: 'routes.costs.1.path',
      message: 'matches the same requests as costs.0',
    });
    expect(issueOf({ method: 'GET', path: '/v1/x', cost: 2, weight: 1 }).field).toBe('routes.costs.0');
  });

  it('accept a cost the upstream reports, refusing a rule that names no field, a max below its reserve, a field the gateway owns', () => {
    const reported = { fromResponseHeader: 'X-Usage-Units', reserve: 10, max: 1000 };
    const parsed = parseCosts({ method: 'GET', path: '/v1/x', cost: reported });
    expect(parsed.success && parsed.data.routes.costs[0]!.cost).toEqual({
      fromResponseHeader: 'x-usage-units',
      reserve: 10,
      max: 1000,
      forwardHeader: false,
    });
    expect(issueOf({ method: 'GET', path: '/v1/x', cost: { reserve: 10, max: 1000 } })).toEqual({
      field: 'routes.costs.0.cost',
      message: 'give fromResponseHeader, fromTrailer or both',
    });
    expect(issueOf({ method: 'GET', path: '/v1/x', cost: { ...reported, max: 5 } })).toEqual({
      field: 'routes.costs.0.cost.max',
      message: 'cannot be lower than reserve',
    });
    expect(issueOf({ method: 'GET', path: '/v1/x', cost: { ...reported, reserve: 0 } }).field).toBe('routes.costs.0.cost.reserve');
    expect(issueOf({ method: 'GET', path: '/v1/x', cost: { ...reported, fromTrailer: 'ratelimit' } }).field).toBe(
      'routes.costs.0.cost.fromTrailer',
    );
    expect(issueOf({ method: 'GET', path: '/v1/x', cost: { ...reported, per: 'token' } }).field).toBe('routes.costs.0.cost');
    // A plain number keeps its own messages.
    expect(issueOf({ method: 'GET', path: '/v1/x', cost: 'ten' })).toEqual({ field: 'routes.costs.0.cost', message: 'must be a number' });
  });

  it('reserve a reported cost’s `reserve` units, and give the service’s rule where no route rule matches', () => {
    const reported = { fromResponseHeader: 'x-usage-units', reserve: 10, max: 1000, forwardHeader: false };
    const service = { ...reported, reserve: 3 };
    const costs = new RouteCosts([{ method: 'POST', path: '/v1/completions', cost: reported }]);
    expect(costs.costOf('POST', '/v1/completions')).toBe(10);
    expect(costs.ruleOf('POST', '/v1/completions', service)).toBe(reported);
    expect(costs.ruleOf('GET', '/v1/completions', service)).toBe(service);
    expect(costs.ruleOf('GET', '/v1/completions')).toBe(1);
  });

  it('cost a request no rule matches 1, and a HEAD what its GET costs', () => {
    const costs = new RouteCosts([
      { method: 'GET', path: '/v1/search/{kind}', cost: 4 },
      { method: 'POST', path: '/v1/categories', cost: 3 },
    ]);
    expect(costs.costOf('GET', '/v1/search/pets')).toBe(4);
    expect(costs.costOf('HEAD', '/v1/search/pets/')).toBe(4);
    expect(costs.costOf('POST', '/v1/categories')).toBe(3);
    expect(costs.costOf('GET', '/v1/categories')).toBe(1);
    expect(costs.costOf('GET', '/v1/search/pets/more')).toBe(1);
  });
});
