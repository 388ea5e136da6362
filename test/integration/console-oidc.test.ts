import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { JWTPayload } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consoleOidcYaml } from '../helpers/console-idp.js';
import { freePort } from '../helpers/ports.js';
import { pollUntil } from '../helpers/poll.js';
import { ScriptedIdp } from '../helpers/scripted-idp.js';
import { configCopy, startGateway, type GatewayHandle } from '../helpers/stack.js';

// The console's sign-in with an OpenID provider, over real HTTP, against a provider the test
// scripts (test/helpers/scripted-idp.ts) on another site (localhost) than the console
// (127.0.0.1): the honest flow (PKCE, state, nonce, cookies), and what an attacker or a confused
// provider tries: a replayed state, a callback without the browser's state cookie, an ID token with
// another nonce, issuer or audience or signed by a key the provider does not publish, an open
// redirect in the return path, an account without a role. The same flow in Chromium against a real
// provider: console-oidc-browser.test.ts.

const SECRET_ENV = 'TOLLGATE_CONSOLE_OIDC_SECRET';
let idp: ScriptedIdp;
let gateway: GatewayHandle;
let admin = '';
let configDir = '';

const USERS = {
  viewer: { sub: 'u-viewer', email: 'vera@example.test', groups: ['staff', 'tollgate-viewers'] },
  operator: { sub: 'u-operator', email: 'otto@example.test', groups: ['tollgate-operators'] },
  partner: { sub: 'u-partner', email: 'pat@acme.test', groups: ['partners'], tollgate_owner: 'acme' },
  nobody: { sub: 'u-sales', email: 'sam@example.test', groups: ['sales'] },
};

beforeAll(async () => {
  idp = await new ScriptedIdp().start();
  const adminPort = await freePort();
  admin = `http://127.0.0.1:${adminPort}`;
  configDir = configCopy({ 'gateway.yaml': (text) => text + consoleOidcYaml(idp.issuer, idp.clientId, admin, SECRET_ENV) });
  gateway = await startGateway({
    TOLLGATE_CONFIG_DIR: configDir,
    TOLLGATE_ADMIN_TOKENS: 'ops:ops-token-0123456789abcdefghijklmnopqrstuv',
    ADMIN_PORT: String(adminPort),
    [SECRET_ENV]: idp.clientSecret,
  });
});

afterAll(async () => {
  await gateway?.process.stop();
  await idp?.stop();
});

const pair = (setCookie: string) => setCookie.split(';', 1)[0]!;
function cookiesOf(response: Response): string[] {
  return response.headers.getSetCookie();
}

/** The browser's part up to the callback: start, the provider's redirect, and the callback URL with the state cookie. */
async function toCallback(user: JWTPayload, returnPath?: string) {
  idp.claims = user;
  const start = await fetch(
    `${admin}/admin/console/oidc/start${returnPath === undefined ? '' : `?return=${encodeURIComponent(returnPath)}`}`,
    {
      redirect: 'manual',
    },
  );
  expect(start.status, await start.clone().text()).toBe(302);
  const [stateCookie] = cookiesOf(start);
  const atIdp = await fetch(start.headers.get('location')!, { redirect: 'manual' });
  expect(atIdp.status).toBe(302);
  return { start, stateCookie: stateCookie!, callbackUrl: atIdp.headers.get('location')! };
}

async function callback(url: string, cookie?: string) {
  return fetch(url, { redirect: 'manual', headers: cookie ? { cookie } : {} });
}

/** A whole sign-in: the session cookie pair (name=value). */
async function signIn(user: JWTPayload): Promise<string> {
  const { stateCookie, callbackUrl } = await toCallback(user);
  const back = await callback(callbackUrl, pair(stateCookie));
  expect(back.status, await back.clone().text()).toBe(302);
  return pair(cookiesOf(back).find((c) => c.startsWith('tg_console='))!);
}

async function refusedWith(response: Response, status: number, code: string) {
  expect(response.status).toBe(status);
  expect(await response.json()).toEqual({ code, status, message: expect.any(String) });
  expect(cookiesOf(response).some((c) => /^tg_console=[^;]/.test(c))).toBe(false);
}

describe('signing in with the OpenID provider', () => {
  it('says it is on, and where', async () => {
    const on = await fetch(`${admin}/admin/console/oidc`);
    expect(await on.json()).toEqual({ issuer: idp.issuer });
  });

  it('sends the browser to the provider with PKCE (S256), a state and a nonce, the state also in a Lax cookie', async () => {
    const { start, stateCookie } = await toCallback(USERS.viewer);
    const asked = idp.authorizations.at(-1)!;
    expect(asked).toMatchObject({ clientId: idp.clientId, challengeMethod: 'S256', redirectUri: `${admin}/admin/console/oidc/callback` });
    expect(asked.scope.split(' ')).toEqual(['openid', 'email', 'groups']);
    expect(asked.state).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(asked.nonce).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(asked.nonce).not.toBe(asked.state);
    expect(stateCookie).toBe(`tg_oidc_state=${asked.state}; Path=/admin/console/oidc; HttpOnly; SameSite=Lax; Max-Age=600`);
    expect(start.headers.get('cache-control')).toBe('no-store');
  });

  it('starts a Strict session with the role and owner the claims map to, and returns to the path it started from', async () => {
    const { stateCookie, callbackUrl } = await toCallback(USERS.partner, '/admin/console/#/keys');
    const back = await callback(callbackUrl, pair(stateCookie));
    expect(back.status).toBe(302);
    expect(back.headers.get('location')).toBe('/admin/console/#/keys');
    const session = cookiesOf(back).find((c) => c.startsWith('tg_console='))!;
    expect(session).toMatch(/^tg_console=[A-Za-z0-9_-]{43}; Path=\/admin; HttpOnly; SameSite=Strict; Max-Age=\d+$/);
    expect(cookiesOf(back)).toContain('tg_oidc_state=; Path=/admin/console/oidc; HttpOnly; SameSite=Lax; Max-Age=0');
    const who = await (await fetch(`${admin}/admin/console/session`, { headers: { cookie: pair(session) } })).json();
    expect(who).toMatchObject({ actor: 'u-partner', email: 'pat@acme.test', role: 'operator', owner: 'acme' });
    expect(who.actions).toContain('keys.create');
    expect(who.actions).not.toContain('services.read');
  });

  it('gives the session what its role allows and nothing more', async () => {
    const viewer = await signIn(USERS.viewer);
    const list = await fetch(`${admin}/admin/v1/keys`, { headers: { cookie: viewer } });
    expect(list.status).toBe(200);
    const { csrf } = await (await fetch(`${admin}/admin/console/session`, { headers: { cookie: viewer } })).json();
    const create = await fetch(`${admin}/admin/v1/keys`, {
      method: 'POST',
      headers: { cookie: viewer, 'x-csrf-token': csrf, 'content-type': 'application/json' },
      body: JSON.stringify({ plan: 'free' }),
    });
    expect(create.status).toBe(403);
    expect((await create.json()).code).toBe('insufficient_role');
    const operator = await signIn(USERS.operator);
    const { csrf: csrf2 } = await (await fetch(`${admin}/admin/console/session`, { headers: { cookie: operator } })).json();
    const made = await fetch(`${admin}/admin/v1/keys`, {
      method: 'POST',
      headers: { cookie: operator, 'x-csrf-token': csrf2, 'content-type': 'application/json' },
      body: JSON.stringify({ plan: 'free' }),
    });
    expect(made.status).toBe(201);
    const { id } = await made.json();
    const audit = await (await fetch(`${admin}/admin/v1/audit?actor=otto@example.test`, { headers: { cookie: operator } })).json();
    expect(audit.entries[0]).toMatchObject({ actor: 'u-operator', email: 'otto@example.test', role: 'operator', keyId: id });
  });

  it('rotates the session at sign-in: the session the browser had ends', async () => {
    const first = await signIn(USERS.viewer);
    const { stateCookie, callbackUrl } = await toCallback(USERS.viewer);
    const back = await callback(callbackUrl, `${pair(stateCookie)}; ${first}`);
    const second = pair(cookiesOf(back).find((c) => c.startsWith('tg_console='))!);
    expect(second).not.toBe(first);
    expect((await fetch(`${admin}/admin/console/session`, { headers: { cookie: first } })).status).toBe(401);
    expect((await fetch(`${admin}/admin/console/session`, { headers: { cookie: second } })).status).toBe(200);
  });

  it('ends the session when the ID token does, sooner than its own eight hours', async () => {
    idp.ttlSeconds = 2;
    try {
      const { stateCookie, callbackUrl } = await toCallback(USERS.viewer);
      const back = await callback(callbackUrl, pair(stateCookie));
      const session = cookiesOf(back).find((c) => c.startsWith('tg_console='))!;
      expect(Number(/Max-Age=(\d+)/.exec(session)![1])).toBeLessThanOrEqual(2);
      const statuses = await pollUntil(
        () => fetch(`${admin}/admin/console/session`, { headers: { cookie: pair(session) } }).then((r) => r.status),
        (status) => status === 401,
        { deadline: Date.now() + 30_000, everyMs: 200 },
      );
      expect(statuses).toBe(401);
    } finally {
      idp.ttlSeconds = 600;
    }
  });
});

describe('refusing a sign-in', () => {
  it('refuses a replayed state: the same callback a second time', async () => {
    const { stateCookie, callbackUrl } = await toCallback(USERS.operator);
    expect((await callback(callbackUrl, pair(stateCookie))).status).toBe(302);
    await refusedWith(await callback(callbackUrl, pair(stateCookie)), 401, 'sign_in_failed');
    // Refused for its state, before the provider is asked (which would refuse the used code too).
    await gateway.process.waitForLog(
      'console sign-in refused',
      60_000,
      (line) => line.cause === 'the state is unknown, used already or too old',
    );
  });

  it('refuses a callback without the browser’s state cookie (an attacker’s callback sent to a victim)', async () => {
    const { callbackUrl } = await toCallback(USERS.operator);
    await refusedWith(await callback(callbackUrl), 401, 'sign_in_failed');
    const other = await toCallback(USERS.operator);
    await refusedWith(await callback(callbackUrl, pair(other.stateCookie)), 401, 'sign_in_failed');
  });

  const edits: Array<[string, (c: JWTPayload) => JWTPayload]> = [
    ['another sign-in’s nonce', (c: JWTPayload): JWTPayload => ({ ...c, nonce: 'n'.repeat(43) })],
    ['no nonce', (c: JWTPayload) => ({ ...c, nonce: undefined })],
    ['another issuer', (c: JWTPayload) => ({ ...c, iss: 'http://localhost:1' })],
    ['another audience', (c: JWTPayload) => ({ ...c, aud: 'someone-else' })],
    ['an audience list naming another client as azp', (c: JWTPayload) => ({ ...c, aud: ['tollgate-console', 'x'], azp: 'x' })],
    ['an expiry in the past', (c: JWTPayload) => ({ ...c, exp: Math.floor(Date.now() / 1000) - 3600 })],
  ];
  for (const [name, edit] of edits) {
    it(`refuses an ID token with ${name}`, async () => {
      idp.idToken = edit;
      try {
        const { stateCookie, callbackUrl } = await toCallback(USERS.operator);
        await refusedWith(await callback(callbackUrl, pair(stateCookie)), 401, 'sign_in_failed');
      } finally {
        idp.idToken = (c) => c;
      }
    });
  }

  it('refuses an ID token signed by a key the provider does not publish', async () => {
    idp.foreignKey = true;
    try {
      const { stateCookie, callbackUrl } = await toCallback(USERS.operator);
      await refusedWith(await callback(callbackUrl, pair(stateCookie)), 401, 'sign_in_failed');
    } finally {
      idp.foreignKey = false;
    }
  });

  it('answers 502 when the provider’s token endpoint fails, and says so at error level', async () => {
    idp.tokenFailure = 500;
    try {
      const { stateCookie, callbackUrl } = await toCallback(USERS.operator);
      await refusedWith(await callback(callbackUrl, pair(stateCookie)), 502, 'sign_in_provider_unavailable');
      await gateway.process.waitForLog('console sign-in: the identity provider is unavailable', 60_000, (line) => line.level === 50);
    } finally {
      idp.tokenFailure = 0;
    }
  });

  it('refuses an open redirect in the return path before anything starts', async () => {
    for (const target of [
      'https://evil.example/',
      '//evil.example/admin/console/',
      '/admin/console/../../evil',
      '/\\evil.example',
      '/admin/consolex',
      'javascript:alert(1)',
    ]) {
      const start = await fetch(`${admin}/admin/console/oidc/start?return=${encodeURIComponent(target)}`, { redirect: 'manual' });
      expect(start.status, target).toBe(400);
      expect((await start.json()).code).toBe('invalid_query');
      expect(cookiesOf(start)).toEqual([]);
    }
  });

  it('gives no access to an account whose claims map to no role', async () => {
    const { stateCookie, callbackUrl } = await toCallback(USERS.nobody);
    await refusedWith(await callback(callbackUrl, pair(stateCookie)), 403, 'no_console_role');
  });

  it('keeps the code, the ID token, the cookies and the client secret out of its output', async () => {
    const output = gateway.process.output();
    expect(output).toContain('console sign-in refused');
    expect(output).toContain('"via":"oidc"');
    expect(idp.issued.length).toBeGreaterThan(5);
    for (const token of idp.issued) {
      expect(output).not.toContain(token);
      expect(output).not.toContain(token.split('.')[2]);
    }
    expect(output).not.toContain(idp.clientSecret);
    expect(output).not.toMatch(/code-\d+-/);
    expect(output).not.toMatch(/tg_console=|tg_oidc_state=/);
    for (const auth of idp.authorizations) {
      expect(output).not.toContain(auth.state);
      expect(output).not.toContain(auth.nonce);
    }
  });
});

describe('reloading gateway.yaml', () => {
  it('turns the OpenID sign-in off and on again without a restart, and refuses a broken section', async () => {
    const file = join(configDir, 'gateway.yaml');
    const withOidc = readFileSync(file, 'utf8');
    const status = () => fetch(`${admin}/admin/console/oidc`).then((r) => r.status);
    const deadline = () => ({ deadline: Date.now() + 60_000, everyMs: 100 });
    writeFileSync(file, withOidc.slice(0, withOidc.indexOf('\nconsole:')));
    expect(await pollUntil(status, (s) => s === 404, deadline())).toBe(404);
    writeFileSync(file, withOidc);
    expect(await pollUntil(status, (s) => s === 200, deadline())).toBe(200);
    writeFileSync(file, withOidc.replace('partners: operator', 'partners: root'));
    await gateway.process.waitForLog('config reload refused; the previous config stays in force', 60_000, (line) =>
      String(line.error).includes('console.oidc.roles.partners'),
    );
    expect(await status()).toBe(200);
    writeFileSync(file, withOidc);
  });
});
