import { afterAll, beforeAll, expect, it } from 'vitest';
import { admin, OPS_TOKEN } from '../helpers/admin-client.js';
import { chromiumMissing, launchChromium, type Chromium } from '../helpers/chromium.js';
import { ConsoleIdp, consoleOidcYaml } from '../helpers/console-idp.js';
import { describeNeeding } from '../helpers/needs-tool.js';
import { freePort } from '../helpers/ports.js';
import { configCopy, startGateway, type GatewayHandle } from '../helpers/stack.js';

// A browser on a loaded machine: each step waits as long as it needs (expect.poll's default is 1 s).
const POLL = { timeout: 30_000 };

// The console's sign-in with a real OpenID provider (oidc-provider) in Debian's Chromium, the
// provider on another site (localhost) than the console (127.0.0.1), as a company's provider is:
// three people sign in on the provider's own page (a viewer, an operator, and an operator of the
// partner team acme), each sees and does only what the role allows, and signs out. The refusals
// (replayed state, wrong nonce, issuer or audience, open redirect): console-oidc.test.ts.

const SECRET_ENV = 'TOLLGATE_CONSOLE_OIDC_SECRET';
const USERS = {
  vera: { email: 'vera@example.test', groups: ['staff', 'tollgate-viewers'] },
  otto: { email: 'otto@example.test', groups: ['tollgate-operators'] },
  pat: { email: 'pat@acme.test', groups: ['partners'], tollgate_owner: 'acme' },
};

describeNeeding(chromiumMissing, 'signing in to the console with an OpenID provider, in Chromium', () => {
  let idp: ConsoleIdp;
  let gateway: GatewayHandle;
  let browser: Chromium;
  let consoleUrl = '';
  let acmeKey = '';
  let globexKey = '';
  /** Every session cookie value the browser held: none may appear in the gateway's output. */
  const sessionCookies: string[] = [];

  beforeAll(async () => {
    const adminPort = await freePort();
    consoleUrl = `http://127.0.0.1:${adminPort}/admin/console/`;
    idp = await new ConsoleIdp(await freePort(), `http://127.0.0.1:${adminPort}/admin/console/oidc/callback`, USERS).start();
    gateway = await startGateway({
      TOLLGATE_CONFIG_DIR: configCopy({
        'gateway.yaml': (text) => text + consoleOidcYaml(idp.issuer, idp.clientId, `http://127.0.0.1:${adminPort}`, SECRET_ENV),
      }),
      TOLLGATE_ADMIN_TOKENS: `ops:${OPS_TOKEN}`,
      ADMIN_PORT: String(adminPort),
      [SECRET_ENV]: idp.clientSecret,
    });
    const made = async (owner: string) =>
      (await admin(gateway.adminUrl, 'POST', '/keys', { body: { plan: 'free', owner, name: `${owner} key` } })).body.id as string;
    acmeKey = await made('acme');
    globexKey = await made('globex');
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    await gateway?.process.stop();
    await idp?.stop();
  });

  const page = () => browser.page;
  const heading = () => page().locator('h1').innerText();
  const status = () => page().locator('#status').innerText();

  /** Signs `login` in on the provider's page, from the console's sign-in page, and waits for the console. */
  async function signIn(login: keyof typeof USERS, hash = ''): Promise<void> {
    // Each person in a browser of their own: no session at the provider from the one before.
    await page().context().clearCookies();
    await page().goto(`${consoleUrl}${hash}`);
    await expect.poll(heading, POLL).toBe('Sign in');
    const link = page().locator('#oidc a');
    await expect.poll(() => link.isVisible(), POLL).toBe(true);
    // The sign-in page of the last sign-out may still be shown (a change of hash alone reloads
    // nothing): click once the page drawn for this address names it as where to come back to.
    await expect.poll(() => link.getAttribute('href'), POLL).toContain(`return=${encodeURIComponent(`/admin/console/${hash}`)}`);
    await link.click();
    await page().waitForURL((url) => url.host === new URL(idp.issuer).host);
    await page().locator('input[name=login]').fill(login);
    await page().locator('input[name=password]').fill('any password');
    await page().locator('button[type=submit]').click();
    await page().waitForURL((url) => url.href.startsWith(consoleUrl));
    await expect.poll(() => page().locator('#signed-in').innerText(), POLL).toContain(USERS[login].email);
    sessionCookies.push(...(await page().context().cookies()).filter((c) => c.name === 'tg_console').map((c) => c.value));
  }

  async function signOut(): Promise<void> {
    await page().locator('#who button', { hasText: 'Sign out' }).click();
    await expect.poll(heading, POLL).toBe('Sign in');
    const session = await page().evaluate(() => fetch('/admin/console/session').then((r) => r.status));
    expect(session).toBe(401);
    expect((await page().context().cookies()).filter((c) => c.name === 'tg_console')).toEqual([]);
  }

  it('signs a viewer in across sites with a Strict session cookie; the viewer reads and changes nothing', async () => {
    await signIn('vera', '#/keys');
    expect(await page().locator('#signed-in').innerText()).toBe('Signed in as vera@example.test (viewer)');
    // Back where the sign-in started, with a Strict cookie set on the cross-site callback and sent by the page.
    await expect.poll(heading, POLL).toBe('Keys');
    const cookies = await page().context().cookies();
    expect(cookies.find((c) => c.name === 'tg_console')).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/admin' });
    expect(cookies.find((c) => c.name === 'tg_oidc_state')).toBeUndefined();
    await expect.poll(() => page().locator('main table').first().innerText(), POLL).toContain(globexKey);
    expect(await page().locator('form[aria-labelledby=create-h]').count()).toBe(0);
    await page().goto(`${consoleUrl}#/keys/${acmeKey}`);
    await expect.poll(heading, POLL).toBe(`Key ${acmeKey}`);
    expect(await page().locator('main button').allInnerTexts()).toEqual([]);
    await signOut();
  });

  it('signs an operator in, who creates and revokes a key; the audit names the person and the role', async () => {
    await signIn('otto', '#/keys');
    await expect.poll(heading, POLL).toBe('Keys');
    const create = page().locator('form[aria-labelledby=create-h]');
    await create.locator('input[name=name]').fill('made by otto');
    await create.locator('button[type=submit]').click();
    const secret = page().locator('dialog[open] input.secret');
    await expect.poll(() => secret.inputValue(), POLL).toMatch(/^tg_[0-9a-z]{12}_/);
    const id = (await secret.inputValue()).slice(3, 15);
    await page().locator('dialog[open] button[value=done]').click();
    await page().goto(`${consoleUrl}#/keys/${id}`);
    await expect.poll(heading, POLL).toBe(`Key ${id}`);
    await page().locator('main button', { hasText: 'Revoke key' }).click();
    await page().locator('dialog[open] button', { hasText: 'Revoke' }).last().click();
    await expect.poll(status, POLL).toContain(`${id} revoked`);
    await page().goto(`${consoleUrl}#/audit`);
    await expect.poll(heading, POLL).toBe('Audit');
    await expect.poll(() => page().locator('main table').innerText(), POLL).toMatch(/otto@example\.test\s+operator\s+key\.revoke/);
    await signOut();
  });

  it('signs a partner’s operator in, who sees and manages only acme’s keys', async () => {
    await signIn('pat', '#/keys');
    expect(await page().locator('#signed-in').innerText()).toBe('Signed in as pat@acme.test (operator, keys of acme)');
    await expect.poll(heading, POLL).toBe('Keys');
    const list = () => page().locator('main table').first().innerText();
    await expect.poll(list, POLL).toContain(acmeKey);
    expect(await list()).not.toContain(globexKey);
    const create = page().locator('form[aria-labelledby=create-h]');
    expect(await create.locator('input[name=owner]').inputValue()).toBe('acme');
    expect(await create.locator('input[name=owner]').getAttribute('readonly')).not.toBeNull();
    await page().goto(`${consoleUrl}#/keys/${globexKey}`);
    await expect.poll(status, POLL).toMatch(/limited to the keys of acme/);
    expect(await page().locator('#nav a[href="#/overview"]').count()).toBe(1);
    await page().goto(`${consoleUrl}#/overview`);
    await expect.poll(heading, POLL).toBe('Overview');
    expect(await page().locator('main').innerText()).not.toContain('Upstream health');
    await signOut();
  });

  it('kept every session cookie and the client secret out of its output, and logged each sign-in with its role', async () => {
    const output = gateway.process.output();
    expect(sessionCookies.length).toBe(3);
    for (const value of sessionCookies) expect(output).not.toContain(value);
    expect(output).not.toContain(idp.clientSecret);
    const signIns = gateway.process.logs().filter((line) => line.msg === 'console sign-in');
    expect(signIns.map((line) => [line.actor, line.role])).toEqual([
      ['vera', 'viewer'],
      ['otto', 'operator'],
      ['pat', 'operator'],
    ]);
  });
});
