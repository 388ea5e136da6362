import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, ADMIN_TOKENS, OPS_TOKEN } from '../helpers/admin-client.js';
import { Contract } from '../helpers/contract.js';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, configCopy, slackRedisTimeout, startGateway, testPlans, type GatewayHandle } from '../helpers/stack.js';

// The console's security over plain HTTP (no browser needed): off without admin tokens; strict
// headers on its page; sign-in exchanges a token for an HttpOnly, SameSite=Strict cookie, and
// failed sign-ins count against the admin API's limit; a change with the cookie needs the
// session's CSRF token and a same-origin Origin; the session's changes are audited under the
// token's label; sign-out ends it. And the console's admin API additions (/traffic, /bans, the
// key search and audit filters) answer as openapi-admin.yaml says.

let redis: TestRedis;
let upstream: EchoUpstream;
let gateway: GatewayHandle;
let contract: Contract;

beforeAll(async () => {
  redis = await TestRedis.start();
  upstream = await new EchoUpstream().start();
  contract = await Contract.load('openapi-admin.yaml', '/admin/v1');
  gateway = await consoleGateway();
});

afterAll(async () => {
  await gateway?.process.stop();
  await upstream?.stop();
  await redis?.stop();
});

/** A gateway with admin tokens; `tiny` allows 1 request a minute and bans after 2 refusals. */
function consoleGateway(): Promise<GatewayHandle> {
  const configDir = configCopy({
    'plans.yaml': () => testPlans(1, { afterRejections: 2, window: 60, duration: 600 }),
    'gateway.yaml': slackRedisTimeout,
  });
  return startGateway({
    REDIS_URL: redis.url,
    UPSTREAM_URL: upstream.url,
    TOLLGATE_CONFIG_DIR: configDir,
    TOLLGATE_ADMIN_TOKENS: ADMIN_TOKENS,
  });
}

const at = (path: string) => `${gateway.adminUrl}${path}`;

async function signIn(token: string, headers: Record<string, string> = {}) {
  return fetch(at('/admin/console/session'), {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ token }),
  });
}

async function session() {
  const response = await signIn(OPS_TOKEN);
  expect(response.status).toBe(201);
  const cookie = response.headers.get('set-cookie')!.split(';', 1)[0]!;
  const { csrf } = (await response.json()) as { csrf: string };
  return { cookie, csrf };
}

/** An admin API call with the console's cookie (and CSRF token when given), checked against the contract. */
async function withSession(method: string, path: string, s: { cookie: string; csrf?: string }, body?: unknown, origin?: string) {
  const headers: Record<string, string> = { cookie: s.cookie };
  if (s.csrf) headers['x-csrf-token'] = s.csrf;
  if (origin) headers.origin = origin;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(at(`/admin/v1${path}`), { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  const answer = {
    method,
    path: `/admin/v1${path}`,
    status: response.status,
    headers: response.headers,
    body: text ? JSON.parse(text) : undefined,
  };
  expect(contract.check(answer), `${method} ${path} → ${answer.status} ${text}`).toEqual([]);
  return answer;
}

describe('the console without admin tokens', () => {
  it('is absent: 404 on its page and its session', async () => {
    const plain = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: upstream.url, TOLLGATE_ADMIN_TOKENS: '' });
    try {
      expect((await fetch(`${plain.adminUrl}/admin/console`)).status).toBe(404);
      expect((await fetch(`${plain.adminUrl}/admin/console/app.js`)).status).toBe(404);
      const response = await fetch(`${plain.adminUrl}/admin/console/session`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token: OPS_TOKEN }),
      });
      expect(response.status).toBe(404);
    } finally {
      await plain.process.stop();
    }
  });
});

describe('the console page', () => {
  it('is served with a strict CSP, no framing, no sniffing, and revalidated on each load', async () => {
    const response = await fetch(at('/admin/console'));
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const csp = response.headers.get('content-security-policy')!;
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("style-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain('unsafe-inline');
    expect(response.headers.get('x-frame-options')).toBe('DENY');
    expect(response.headers.get('x-content-type-options')).toBe('nosniff');
    expect(response.headers.get('cache-control')).toBe('no-cache');
    const html = await response.text();
    expect(html).not.toMatch(/<script>|<style>|\sstyle=|\son[a-z]+=/i); // nothing inline
    const etag = response.headers.get('etag')!;
    expect((await fetch(at('/admin/console'), { headers: { 'if-none-match': etag } })).status).toBe(304);
  });

  it('ships only its own files: no CDN, and a first load under 40 KB', async () => {
    const html = await (await fetch(at('/admin/console'))).text();
    expect(html).not.toMatch(/https?:\/\//i);
    let bytes = Buffer.byteLength(html);
    for (const file of ['app.js', 'api.js', 'dom.js', 'app.css']) {
      const response = await fetch(at(`/admin/console/${file}`));
      expect(response.status, file).toBe(200);
      const text = await response.text();
      expect(text, file).not.toMatch(/https?:\/\/(?!www\.w3\.org\/2000\/svg)/);
      bytes += Buffer.byteLength(text);
    }
    expect(bytes).toBeLessThan(40_000);
    expect((await fetch(at('/admin/console/../admin/v1/keys'))).status).not.toBe(200);
    expect((await fetch(at('/admin/console/nope.js'))).status).toBe(404);
  });
});

describe('signing in', () => {
  it('exchanges an admin token for an HttpOnly, SameSite=Strict session cookie and a CSRF token', async () => {
    const response = await signIn(OPS_TOKEN);
    expect(response.status).toBe(201);
    const cookie = response.headers.get('set-cookie')!;
    expect(cookie).toMatch(/^tg_console=[A-Za-z0-9_-]{43}; Path=\/admin; HttpOnly; SameSite=Strict; Max-Age=\d+$/);
    const body = (await response.json()) as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(['actions', 'actor', 'csrf', 'email', 'expiresAt', 'owner', 'role']);
    expect(body).toMatchObject({ actor: 'ops', role: 'admin', owner: null, email: null });
    expect(body.actions).toContain('cache.purge');
    expect(JSON.stringify(body)).not.toContain(OPS_TOKEN);
    const who = await fetch(at('/admin/console/session'), { headers: { cookie: cookie.split(';', 1)[0]! } });
    expect(await who.json()).toMatchObject({ actor: 'ops', csrf: body.csrf });
  });

  it('refuses a sign-in from another origin', async () => {
    const response = await signIn(OPS_TOKEN, { origin: 'http://evil.example' });
    expect(response.status).toBe(403);
    expect(response.headers.get('set-cookie')).toBeNull();
  });

  it('refuses a wrong token (401), then limits the address like the admin API (429 with Retry-After)', async () => {
    const first = await signIn('wrong-token-0123456789abcdefghijklmnopq');
    expect(first.status).toBe(401);
    expect(((await first.json()) as { code: string }).code).toBe('invalid_admin_token');
    expect(first.headers.get('set-cookie')).toBeNull();
    let last = first;
    for (let i = 0; i < 12 && last.status !== 429; i++) last = await signIn('wrong-token-0123456789abcdefghijklmnopq');
    expect(last.status).toBe(429);
    expect(Number(last.headers.get('retry-after'))).toBeGreaterThan(0);
    // The same limit covers the admin API's bearer tokens, and the right token too, until the window ends.
    expect((await signIn(OPS_TOKEN)).status).toBe(429);
    expect((await admin(gateway.adminUrl, 'GET', '/plans')).status).toBe(429);
  });
});

describe('a console session on the admin API', () => {
  // The failed sign-ins above block this address for a minute: these run on a fresh gateway.
  let fresh: GatewayHandle;
  let s: { cookie: string; csrf: string };
  const freshAt = (path: string) => `${fresh.adminUrl}${path}`;

  beforeAll(async () => {
    fresh = await consoleGateway();
    gateway = { ...gateway, adminUrl: fresh.adminUrl, url: fresh.url };
    s = await session();
  });
  afterAll(async () => {
    await fresh?.process.stop();
  });

  let id = '';
  let key = '';

  it('reads without a CSRF token, and changes with it, audited under the token’s label', async () => {
    expect((await withSession('GET', '/plans', { cookie: s.cookie })).status).toBe(200);
    const created = await withSession('POST', '/keys', s, { plan: 'tiny', name: 'console http', owner: 'globex' });
    expect(created.status).toBe(201);
    ({ id, key } = created.body);
    const audit = await withSession('GET', `/audit?keyId=${id}`, { cookie: s.cookie });
    expect(audit.body.entries).toMatchObject([{ actor: 'ops', action: 'key.create', keyId: id }]);
  });

  it('refuses a change without the CSRF token (403) and changes nothing', async () => {
    const refused = await withSession('PATCH', `/keys/${id}`, { cookie: s.cookie }, { plan: 'pro' });
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe('invalid_csrf_token');
    const wrong = await withSession('DELETE', `/keys/${id}`, { cookie: s.cookie, csrf: 'x'.repeat(43) });
    expect(wrong.status).toBe(403);
    const crossSite = await withSession('DELETE', `/keys/${id}`, s, undefined, 'http://evil.example');
    expect(crossSite.status).toBe(403);
    expect((await withSession('GET', `/keys/${id}`, { cookie: s.cookie })).body).toMatchObject({ plan: 'tiny', status: 'active' });
    expect((await withSession('GET', `/audit?keyId=${id}`, { cookie: s.cookie })).body.entries).toHaveLength(1);
  });

  it('finds keys by part of their name, owner or id', async () => {
    for (const q of ['CONSOLE http', 'globex', id.slice(2, 9)]) {
      const found = await withSession('GET', `/keys?q=${encodeURIComponent(q)}`, { cookie: s.cookie });
      expect(
        found.body.keys.map((k: { id: string }) => k.id),
        q,
      ).toEqual([id]);
    }
    expect((await withSession('GET', '/keys?q=no-such-key-anywhere', { cookie: s.cookie })).body.keys).toEqual([]);
  });

  it('counts the key’s traffic by decision, lists its ban, and drops it once lifted', async () => {
    const codes: string[] = [];
    for (let i = 0; i < 5; i++) {
      const response = await fetch(`${fresh.url}/v1/categories`, { headers: bearer(key) });
      codes.push(response.status === 200 ? 'ok' : ((await response.json()) as { code: string }).code);
    }
    await fetch(`${fresh.url}/v1/categories`); // no key
    const seen = (code: string) => codes.filter((c) => c === code).length;
    expect(codes[0]).toBe('ok');
    expect(codes.at(-1)).toBe('api_key_banned');
    const traffic = await withSession('GET', '/traffic?seconds=60&top=5', { cookie: s.cookie });
    const sum = (d: string) => traffic.body.seconds.reduce((n: number, sec: { counts: Record<string, number> }) => n + sec.counts[d]!, 0);
    expect([sum('admitted'), sum('limited'), sum('banned'), sum('unauthenticated')]).toEqual([
      1,
      seen('rate_limit_exceeded'),
      seen('api_key_banned'),
      1,
    ]);
    expect(traffic.body.seconds).toHaveLength(60);
    expect(traffic.body.topKeys.byRefusals).toEqual([{ id, requests: 5, refusals: 4 }]);
    const bans = await withSession('GET', '/bans', { cookie: s.cookie });
    expect(bans.body.bans).toMatchObject([{ id, plan: 'tiny' }]);
    expect((await withSession('DELETE', `/keys/${id}/ban`, s)).body).toEqual({ id, unbanned: true });
    expect((await withSession('GET', '/bans', { cookie: s.cookie })).body.bans).toEqual([]);
    expect((await withSession('GET', '/traffic?seconds=0', { cookie: s.cookie })).status).toBe(400);
  });

  it('filters the audit by key, actor and action', async () => {
    expect((await withSession('GET', `/audit?keyId=${id}&action=key.unban`, { cookie: s.cookie })).body.entries).toMatchObject([
      { actor: 'ops', action: 'key.unban' },
    ]);
    expect((await withSession('GET', `/audit?keyId=${id}&actor=cli`, { cookie: s.cookie })).body.entries).toEqual([]);
    expect((await withSession('GET', '/audit?action=key.nope', { cookie: s.cookie })).status).toBe(400);
  });

  it('signs out: the cookie opens nothing afterwards; signing out needs the CSRF token', async () => {
    const noCsrf = await fetch(freshAt('/admin/console/session'), { method: 'DELETE', headers: { cookie: s.cookie } });
    expect(noCsrf.status).toBe(403);
    const out = await fetch(freshAt('/admin/console/session'), { method: 'DELETE', headers: { cookie: s.cookie, 'x-csrf-token': s.csrf } });
    expect(out.status).toBe(204);
    expect(out.headers.get('set-cookie')).toMatch(/^tg_console=; .*Max-Age=0/);
    const after = await withSession('GET', '/keys', { cookie: s.cookie });
    expect(after.status).toBe(401);
    expect(after.body.message).toContain('sign in again');
  });
});
