import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../harness/free-port.js';
import { admin, ADMIN_TOKENS } from '../helpers/admin-client.js';
import { call, replacingServices } from '../helpers/edge-rules-stack.js';
import { AUDIENCE, CLIENT_ID, OpenIdProvider, providerKey } from '../helpers/openid-provider.js';
import { RecordingUpstream, type RecordedRequest } from '../helpers/recording-upstream.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, configCopy, createKey, keysCli, slackRedisTimeout, startGateway, type GatewayHandle } from '../helpers/stack.js';

// Scopes against real processes (docs/policies.md, "Scopes and anonymous callers"): keys carry
// them (CLI, admin API, audited), tokens of a real OpenID Provider bring theirs, a service (per
// method) and a route require them; a request without them is 403 insufficient_scope with the
// RFC 6750 challenge and consumes nothing; the assertion carries the consumer's scopes.

let redis: TestRedis;
let upstream: RecordingUpstream;
let op: OpenIdProvider;
let gateway: GatewayHandle;
let configDir: string;

const withScopes = (yaml: string, target: string) =>
  replacingServices(
    slackRedisTimeout(yaml),
    `
services:
  - name: cats
    paths: [/v1/categories]
    targets: [${target}]
    requireScopes:
      GET: [categories:read]
      "*": [categories:write]
`,
  ).replace(
    /^ {2}costs: \[\][^\n]*\n/m,
    `  costs: []
  access:
    - { method: DELETE, path: "/v1/categories/{id}", requireScopes: [categories:admin] }
    - { method: GET, path: "/v1/pets/{petId}", requireScopes: [pets:read] }
`,
  );

beforeAll(async () => {
  let port: number;
  [redis, upstream, port] = await Promise.all([TestRedis.start(), new RecordingUpstream().start(), freePort()]);
  op = await new OpenIdProvider(port, [await providerKey('key-1')]).start();
  configDir = configCopy({
    'gateway.yaml': (text) =>
      withScopes(text, upstream.url) +
      `
jwt:
  issuers:
    - { name: pets-idp, issuer: "${op.issuer}", discovery: true, audiences: [${AUDIENCE}], plan: { default: free } }
`,
  });
  gateway = await startGateway({
    REDIS_URL: redis.url,
    UPSTREAM_URL: upstream.url,
    TOLLGATE_CONFIG_DIR: configDir,
    TOLLGATE_ADMIN_TOKENS: ADMIN_TOKENS,
  });
}, 120_000);

afterAll(async () => {
  await gateway?.process.stop();
  await Promise.all([op?.stop(), redis?.stop(), upstream?.stop()]);
});

const request = (path: string, headers: Record<string, string>, method = 'GET') => call(`${gateway.url}${path}`, { method, headers });
const used = async (headers: Record<string, string>) => (await request('/v1/usage', headers)).json.day.used as number;
const last = (): RecordedRequest => upstream.requests.at(-1)!;
const assertionOf = (seen: RecordedRequest) => decodeJwt(upstream.header(seen, 'x-tollgate-assertion')[0]!);

describe('scopes on keys', () => {
  it('are set by the CLI (--scope, set-scopes, --clear), shown, and refused when malformed, naming --scope', async () => {
    const created = await createKey(redis, ['--plan', 'free', '--scope', 'categories:read', '--scope', 'categories:read'], configDir);
    const shown = await keysCli(redis, ['show', created.id, '--json'], configDir);
    expect(JSON.parse(shown.stdout).scopes).toEqual(['categories:read']);
    expect((await keysCli(redis, ['show', created.id], configDir)).stdout).toContain('scopes:   categories:read');
    const set = await keysCli(redis, ['set-scopes', created.id, 'a,b', 'categories:write', '--json'], configDir);
    expect(set.code).toBe(0);
    expect(JSON.parse(set.stdout).scopes).toEqual(['a,b', 'categories:write']);
    const bad = await keysCli(redis, ['create', '--plan', 'free', '--scope', 'quo"te'], configDir);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/--scope must be a scope name/);
    const badSet = await keysCli(redis, ['set-scopes', created.id, 'ok', 'has\\back'], configDir);
    expect(badSet.stderr).toMatch(/scope must be a scope name/);
    const cleared = await keysCli(redis, ['set-scopes', created.id, '--clear', '--json'], configDir);
    expect(JSON.parse(cleared.stdout).scopes).toBeUndefined();
  });

  it('are set through the admin API (create and PATCH), audited, and in force on the next request', async () => {
    const created = await admin(gateway.adminUrl, 'POST', '/keys', { body: { plan: 'free', scopes: ['categories:read'] } });
    expect(created.status).toBe(201);
    expect(created.body.scopes).toEqual(['categories:read']);
    const id = created.body.id as string;
    const key = bearer(created.body.key as string);
    expect((await request('/v1/categories', key)).status).toBe(200);
    expect((await request('/v1/categories', key, 'POST')).status).toBe(403);

    const bad = await admin(gateway.adminUrl, 'PATCH', `/keys/${id}`, { body: { scopes: ['has space'] } });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toMatch(/^scopes\.0 must be a scope name/);
    const patched = await admin(gateway.adminUrl, 'PATCH', `/keys/${id}`, { body: { scopes: ['categories:read', 'categories:write'] } });
    expect(patched.body.scopes).toEqual(['categories:read', 'categories:write']);
    expect((await admin(gateway.adminUrl, 'GET', `/keys/${id}`)).body.scopes).toEqual(['categories:read', 'categories:write']);
    const audit = await admin(gateway.adminUrl, 'GET', `/audit?keyId=${id}`);
    expect(audit.body.entries.find((e: any) => e.action === 'key.create').changes.scopes).toEqual({
      before: null,
      after: ['categories:read'],
    });
    expect(audit.body.entries.find((e: any) => e.action === 'key.update').changes.scopes).toEqual({
      before: ['categories:read'],
      after: ['categories:read', 'categories:write'],
    });
    // The store tells every replica at once: the new scopes are in force now.
    expect((await request('/v1/categories', key, 'POST')).status).toBe(200);
    expect((await admin(gateway.adminUrl, 'PATCH', `/keys/${id}`, { body: { scopes: null } })).body.scopes).toBeUndefined();
    expect((await request('/v1/categories', key)).status).toBe(403);
  });
});

describe('a service or route requiring scopes', () => {
  it("admits a key holding them, and the assertion carries the key's scopes", async () => {
    const { key, id } = await createKey(redis, ['--plan', 'free', '--scope', 'categories:read', '--scope', 'other'], configDir);
    const res = await request('/v1/categories', bearer(key));
    expect(res.status).toBe(200);
    expect(assertionOf(last())).toMatchObject({ sub: id, plan: 'free', scope: 'categories:read other' });
    // HEAD is GET's.
    expect((await request('/v1/categories', bearer(key), 'HEAD')).status).toBe(200);
  });

  it('refuses a key without them: 403 insufficient_scope, the RFC 6750 challenge, the rate-limit headers, nothing consumed or forwarded', async () => {
    const { key } = await createKey(redis, ['--plan', 'free', '--scope', 'categories:read'], configDir);
    const before = await used(bearer(key));
    const forwarded = upstream.requests.length;
    const res = await request('/v1/categories', bearer(key), 'POST');
    expect(res.status).toBe(403);
    expect(res.json).toEqual({ code: 'insufficient_scope', message: 'This operation requires the scope categories:write.', status: 403 });
    expect(res.headers['www-authenticate']).toBe('Bearer realm="tollgate", error="insufficient_scope", scope="categories:write"');
    expect(res.headers['x-ratelimit-limit']).toBe('60');
    expect(res.headers['x-ratelimit-remaining']).toBe('60');
    for (let i = 0; i < 5; i++) expect((await request('/v1/categories/7', bearer(key), 'DELETE')).status).toBe(403);
    expect(upstream.requests.length).toBe(forwarded);
    expect(await used(bearer(key))).toBe(before);
  });

  it("adds a route's scopes to its service's: every one is named in the challenge", async () => {
    const { key } = await createKey(redis, ['--plan', 'free', '--scope', 'categories:write'], configDir);
    const res = await request('/v1/categories/7', bearer(key), 'DELETE');
    expect(res.status).toBe(403);
    expect(res.headers['www-authenticate']).toBe(
      'Bearer realm="tollgate", error="insufficient_scope", scope="categories:write categories:admin"',
    );
    expect(res.json.message).toBe('This operation requires the scope categories:admin.');
    const admin = await createKey(redis, ['--plan', 'free', '--scope', 'categories:write', '--scope', 'categories:admin'], configDir);
    expect((await request('/v1/categories/7', bearer(admin.key), 'DELETE')).status).toBe(200);
  });

  it('leaves paths that require nothing to any key', async () => {
    const { key } = await createKey(redis, ['--plan', 'free'], configDir);
    expect((await request('/v1/other', bearer(key))).status).toBe(200);
    expect(assertionOf(last())).not.toHaveProperty('scope');
  });
});

describe('scopes of tokens from a real OpenID Provider', () => {
  it("are the token's `scope`: admitted where it suffices, 403 where it does not, nothing consumed", async () => {
    const token = await op.accessToken(); // client credentials with scope pets:read
    expect(decodeJwt(token).scope).toBe('pets:read');
    const auth = { authorization: `Bearer ${token}` };
    const res = await request('/v1/pets/1', auth);
    expect(res.status).toBe(200);
    expect(assertionOf(last())).toMatchObject({ sub: `jwt:pets-idp:${CLIENT_ID}`, scope: 'pets:read' });
    const before = await used(auth);
    const refused = await request('/v1/categories', auth);
    expect(refused.status).toBe(403);
    expect(refused.json.code).toBe('insufficient_scope');
    expect(refused.headers['www-authenticate']).toBe('Bearer realm="tollgate", error="insufficient_scope", scope="categories:read"');
    expect(await used(auth)).toBe(before);
  });
});
