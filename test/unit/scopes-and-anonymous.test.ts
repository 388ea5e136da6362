import { decodeJwt } from 'jose';
import { describe, expect, it } from 'vitest';
import { AnonymousConsumers } from '../../src/auth/anonymous-consumer.js';
import { tokenScopes } from '../../src/auth/jwt/token-scopes.js';
import { anonymousPlansDefined, plansKeepingAnonymous } from '../../src/config/anonymous-plans.js';
import { gatewayFileSchema } from '../../src/config/gateway-schema.js';
import type { PlansConfig } from '../../src/config/plans-schema.js';
import { AssertionSigner } from '../../src/gateway/assertion-signer.js';
import { RouteAccess } from '../../src/gateway/route-access.js';
import { assertionSecretsFromEnv } from '../../src/identity/assertion-secrets.js';
import { decodeGrant, encodeGrant } from '../../src/keys/ws-ticket.js';
import { TEST_ASSERTION_SECRET } from '../helpers/assertion.js';

// Scopes and anonymous callers as pure parts: the config sections, what a route asks of its
// caller, a token's scopes, the anonymous consumer's id, and the assertion's claims.

const gateway = (yaml: object) => gatewayFileSchema.safeParse(yaml);
const firstIssue = (yaml: object) => {
  const result = gateway(yaml);
  expect(result.success).toBe(false);
  const issue = result.error!.issues[0]!;
  return `${issue.path.join('.')}: ${issue.message}`;
};
const service = (extra: object) => ({ name: 'cats', paths: ['/v1/categories'], targets: ['http://127.0.0.1:1'], ...extra });
const parsedServices = (...services: object[]) => gatewayFileSchema.parse({ services }).services;

describe('config: requireScopes and anonymous', () => {
  it('accepts scopes per method (and "*") on a service, and access rules on routes', () => {
    const parsed = gatewayFileSchema.parse({
      services: [service({ requireScopes: { GET: ['categories:read'], '*': ['categories:write'] }, anonymous: { plan: 'public' } })],
      routes: { access: [{ method: 'GET', path: '/v1/pets/{id}', anonymous: { plan: 'public' }, requireScopes: ['pets:read'] }] },
    });
    expect(parsed.services[0]!.anonymous).toEqual({ plan: 'public', methods: ['GET', 'HEAD'] });
    expect(parsed.routes.access).toHaveLength(1);
  });

  it('refuses malformed scopes, unknown methods, empty lists and rules that say nothing, naming the field', () => {
    expect(firstIssue({ services: [service({ requireScopes: { GET: ['has space'] } })] })).toMatch(
      /^services\.0\.requireScopes\.GET\.0: must be a scope name/,
    );
    expect(firstIssue({ services: [service({ requireScopes: { GET: ['a"b'] } })] })).toMatch(/^services\.0\.requireScopes\.GET\.0: /);
    expect(firstIssue({ services: [service({ requireScopes: { FETCH: ['a'] } })] })).toMatch(
      /^services\.0\.requireScopes(\.FETCH)?: .*FETCH/,
    );
    expect(firstIssue({ services: [service({ requireScopes: { GET: [] } })] })).toMatch(/at least one scope/);
    expect(firstIssue({ services: [service({ requireScopes: {} })] })).toMatch(
      /^services\.0\.requireScopes: must name at least one method/,
    );
    expect(firstIssue({ services: [service({ anonymous: { plan: 'Public' } })] })).toMatch(/^services\.0\.anonymous\.plan: /);
    expect(firstIssue({ services: [service({ anonymous: { plan: 'public', extra: 1 } })] })).toMatch(/^services\.0\.anonymous: /);
    expect(firstIssue({ routes: { access: [{ method: 'GET', path: '/v1/x' }] } })).toMatch(
      /^routes\.access\.0: give requireScopes, anonymous or both/,
    );
    expect(
      firstIssue({
        routes: {
          access: [
            { method: 'GET', path: '/v1/x/{a}', requireScopes: ['a'] },
            { method: 'GET', path: '/v1/x/{b}', requireScopes: ['b'] },
          ],
        },
      }),
    ).toMatch(/^routes\.access\.1\.path: matches the same requests as access\.0/);
  });

  it('anonymous plans must be plans.yaml plans: a gateway.yaml error or a plans.yaml error, naming the field', () => {
    const plans = { plans: { free: { perMinute: 1, perDay: 1 } }, ban: {} } as unknown as PlansConfig;
    const services = parsedServices(service({ anonymous: { plan: 'free' } }), {
      ...service({ anonymous: { plan: 'public' } }),
      name: 'b',
      paths: ['/b'],
    });
    expect(() => anonymousPlansDefined(plans, services, [])).toThrow(
      'gateway.yaml: services.1.anonymous.plan: plan "public" is not defined in plans.yaml',
    );
    const access = gatewayFileSchema.parse({ routes: { access: [{ method: 'GET', path: '/x', anonymous: { plan: 'gone' } }] } }).routes
      .access;
    expect(() => plansKeepingAnonymous(plans, [], access)).toThrow(
      'plans.yaml: plans: plan "gone" is not defined, but gateway.yaml routes.access.0.anonymous.plan gives it to anonymous callers',
    );
    expect(plansKeepingAnonymous(plans, services.slice(0, 1), [])).toBe(plans);
  });
});

describe('RouteAccess: what a request asks of its caller', () => {
  const services = parsedServices(
    service({ requireScopes: { GET: ['categories:read'], '*': ['categories:write'] }, anonymous: { plan: 'public' } }),
    { ...service({}), name: 'open', paths: ['/v1/open'] },
  );
  const access = new RouteAccess(
    gatewayFileSchema.parse({
      routes: {
        access: [
          { method: 'DELETE', path: '/v1/categories/{id}', requireScopes: ['categories:admin'] },
          { method: 'GET', path: '/v1/pets/{id}', anonymous: { plan: 'pets-public' } },
          { method: 'GET', path: '/v1/categories/top', anonymous: { plan: 'top' } },
        ],
      },
    }).routes.access,
    services,
  );

  it('says when nothing is asked anywhere, so requests skip the lookup', () => {
    expect(new RouteAccess([], parsedServices(service({}))).none).toBe(true);
    expect(access.none).toBe(false);
  });

  it('takes the method entry of the service, HEAD that of GET, else "*"', () => {
    expect(access.of('GET', '/v1/categories', 'cats').scopes).toEqual(['categories:read']);
    expect(access.of('HEAD', '/v1/categories', 'cats').scopes).toEqual(['categories:read']);
    expect(access.of('POST', '/v1/categories', 'cats').scopes).toEqual(['categories:write']);
    expect(access.of('GET', '/v1/open/x', 'open')).toEqual({ scopes: [] });
  });

  it("adds a route rule's scopes to the service's, never fewer", () => {
    expect(access.of('DELETE', '/v1/categories/7', 'cats').scopes).toEqual(['categories:write', 'categories:admin']);
  });

  it("admits anonymous callers on the service's methods (GET and HEAD by default) and on a route's own", () => {
    expect(access.of('GET', '/v1/categories', 'cats').anonymousPlan).toBe('public');
    expect(access.of('HEAD', '/v1/categories', 'cats').anonymousPlan).toBe('public');
    expect(access.of('POST', '/v1/categories', 'cats').anonymousPlan).toBeUndefined();
    expect(access.of('GET', '/v1/pets/1', 'default').anonymousPlan).toBe('pets-public');
    expect(access.of('HEAD', '/v1/pets/1', 'default').anonymousPlan).toBe('pets-public');
    expect(access.of('PUT', '/v1/pets/1', 'default').anonymousPlan).toBeUndefined();
    expect(access.of('GET', '/v1/categories/top', 'cats').anonymousPlan).toBe('top');
  });
});

describe('tokenScopes: a JWT access token brings its scopes', () => {
  it('reads `scope` (space-separated) and `scp` (a string or a list), once each', () => {
    expect(tokenScopes({ scope: 'pets:read  pets:write' })).toEqual(['pets:read', 'pets:write']);
    expect(tokenScopes({ scp: ['a', 'b'], scope: 'b c' })).toEqual(['b', 'c', 'a']);
    expect(tokenScopes({ scp: 'x y' })).toEqual(['x', 'y']);
    expect(tokenScopes({})).toBeUndefined();
    expect(tokenScopes({ scope: 42, scp: { a: 1 } })).toBeUndefined();
  });

  it('leaves out what is no scope name, and anything past 64', () => {
    expect(tokenScopes({ scp: ['ok', 'has space', 'quo"te', 7, 'x'.repeat(129)] })).toEqual(['ok']);
    const many = Array.from({ length: 100 }, (_, i) => `s${i}`);
    expect(tokenScopes({ scope: many.join(' ') })).toEqual(many.slice(0, 64));
  });
});

describe('AnonymousConsumers: one consumer per client address', () => {
  const secret = new TextEncoder().encode(TEST_ASSERTION_SECRET);

  it('gives an address one id on every replica holding the secret, another address another id', () => {
    const a = new AnonymousConsumers(secret);
    const b = new AnonymousConsumers(secret);
    expect(a.of('198.51.100.7', 'public')).toEqual({ id: b.of('198.51.100.7', 'public').id, plan: 'public', anonymous: true });
    expect(a.of('198.51.100.7', 'public').id).toMatch(/^anon:[A-Za-z0-9_-]{22}$/);
    expect(a.of('198.51.100.8', 'public').id).not.toBe(a.of('198.51.100.7', 'public').id);
    expect(a.of('198.51.100.7', 'other').id).toBe(a.of('198.51.100.7', 'public').id);
  });

  it('counts an IPv6 client per /64, and an IPv4-mapped address as its IPv4 one', () => {
    const consumers = new AnonymousConsumers(secret);
    const id = (address: string) => consumers.of(address, 'public').id;
    expect(id('2001:db8:1:2::1')).toBe(id('2001:db8:1:2:ffff:ffff:ffff:ffff'));
    expect(id('2001:db8:1:2::1')).toBe(id('2001:0db8:0001:0002:0:0:0:7'));
    expect(id('2001:db8:1:3::1')).not.toBe(id('2001:db8:1:2::1'));
    expect(id('::ffff:198.51.100.7')).toBe(id('198.51.100.7'));
  });

  it('keeps the address out of the id, and needs the secret to link the two', () => {
    const id = new AnonymousConsumers(secret).of('198.51.100.7', 'public').id;
    expect(id).not.toContain('198');
    expect(new AnonymousConsumers(new TextEncoder().encode('another-secret-0123456789abcdef')).of('198.51.100.7', 'public').id).not.toBe(
      id,
    );
  });
});

describe('the assertion: scopes and the anonymous marker', () => {
  const settings = { issuer: 'tollgate', audience: 'tollgate-backend', ttlSeconds: 60, clockToleranceSeconds: 5 };
  const signer = () =>
    new AssertionSigner(assertionSecretsFromEnv({ TOLLGATE_ASSERTION_SECRET: TEST_ASSERTION_SECRET }).current, settings, 100);

  it("carries the consumer's scopes space-separated in `scope`, and none when it holds none", () => {
    const s = signer();
    expect(decodeJwt(s.token('key000000001', 'free', ['a:read', 'b:write']))).toMatchObject({
      sub: 'key000000001',
      scope: 'a:read b:write',
    });
    expect(decodeJwt(s.token('key000000001', 'free'))).not.toHaveProperty('scope');
    // Another set of scopes is another token: a scope change is never stale.
    expect(decodeJwt(s.token('key000000001', 'free', ['a:read'])).scope).toBe('a:read');
    expect(s.signed).toBe(3);
    expect(s.cached('key000000001', 'free', ['a:read'])).toBeDefined();
  });

  it('marks an anonymous request with `anonymous: true` and no subject, plan or scope; one token for all', () => {
    const s = signer();
    const token = s.anonymousToken();
    const claims = decodeJwt(token);
    expect(claims).toMatchObject({ anonymous: true, iss: 'tollgate', aud: 'tollgate-backend' });
    expect(claims).not.toHaveProperty('sub');
    expect(claims).not.toHaveProperty('plan');
    expect(s.anonymousToken()).toBe(token);
    expect(s.signed).toBe(1);
  });
});

describe("WebSocket tickets keep a JWT consumer's scopes", () => {
  it('encodes and decodes them with the grant', () => {
    const grant = { consumer: { id: 'jwt:idp:svc', plan: 'free', scopes: ['pets:read'] }, validUntilMs: 1 };
    expect(decodeGrant(encodeGrant(grant))).toEqual(grant);
    const without = { consumer: { id: 'jwt:idp:svc', plan: 'free' }, validUntilMs: 1 };
    expect(decodeGrant(encodeGrant(without))).toEqual(without);
  });
});
