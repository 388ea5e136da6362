import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { admin, ADMIN_TOKENS, OPS_TOKEN } from '../helpers/admin-client.js';
import { chromiumMissing, launchChromium, type Chromium } from '../helpers/chromium.js';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { describeNeeding } from '../helpers/needs-tool.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, configCopy, slackRedisTimeout, startGateway, testPlans, type GatewayHandle } from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';
import { REPO_ROOT } from '../harness/tollgate.js';

// The operator console in a real browser (Debian's Chromium, driven by playwright-core; no
// browser download): an operator signs in with an admin token, creates a key, watches the gateway
// count its use, exhausts it, lifts its ban, changes it, rotates and revokes it, finds every change
// in the audit, and signs out. The main flows are done with the keyboard only; every page passes
// axe-core without a serious or critical finding; each page is saved as a screenshot.

const SHOTS = join(REPO_ROOT, 'test-results', 'console');
const VIEWER_TOKEN = 'viewer-token-0123456789abcdefghijklmnopqr';
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

describeNeeding(chromiumMissing, 'the operator console in Chromium', () => {
  let redis: TestRedis;
  let upstream: EchoUpstream;
  let gateway: GatewayHandle;
  let browser: Chromium;
  let page: Page;
  let consoleUrl: string;
  let id = '';
  let key = '';
  /** The minute both admissions of the key fell in, if they fell in one. */
  let admittedInMinute: number | undefined;

  beforeAll(async () => {
    redis = await TestRedis.start();
    upstream = await new EchoUpstream().start();
    // `tiny`: 2 requests a minute (and a day), banned after 3 refusals.
    const configDir = configCopy({
      'plans.yaml': () =>
        testPlans(2, { afterRejections: 3, window: 60, duration: 600 }).replace(
          'plans:\n',
          'plans:\n  prepaid: { perMinute: 100, perDay: 1000, credits: required }\n',
        ),
      'gateway.yaml': slackRedisTimeout,
    });
    gateway = await startGateway({
      REDIS_URL: redis.url,
      UPSTREAM_URL: upstream.url,
      TOLLGATE_CONFIG_DIR: configDir,
      TOLLGATE_ADMIN_TOKENS: `${ADMIN_TOKENS},watcher:viewer:${VIEWER_TOKEN}`,
    });
    consoleUrl = `${gateway.adminUrl}/admin/console`;
    mkdirSync(SHOTS, { recursive: true });
    browser = await launchChromium();
    page = browser.page;
    await awayFromDayEdge();
  });

  afterAll(async () => {
    await browser?.close();
    await gateway?.process.stop();
    await upstream?.stop();
    await redis?.stop();
  });

  /** Presses Tab until `selector` has the focus (keyboard only: no click, no programmatic focus). */
  async function tabTo(selector: string, presses = 80): Promise<void> {
    const target = page.locator(selector).first();
    for (let i = 0; i < presses; i++) {
      await page.keyboard.press('Tab');
      if (await target.evaluate((el) => el === document.activeElement).catch(() => false)) return;
    }
    throw new Error(`Tab never reached ${selector}`);
  }

  async function screenshot(name: string): Promise<void> {
    await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  }

  async function expectAccessible(name: string): Promise<void> {
    // Evaluated over the DevTools protocol: the page's CSP (no inline script) rightly refuses a <script> tag.
    if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(AXE_SOURCE);
    const violations = await page.evaluate(async () => {
      const result = await (
        window as unknown as { axe: { run(): Promise<{ violations: Array<{ id: string; impact: string; nodes: unknown[] }> }> } }
      ).axe.run();
      return result.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length }));
    });
    expect(
      violations.filter((v) => v.impact === 'serious' || v.impact === 'critical'),
      `axe on ${name}`,
    ).toEqual([]);
  }

  const use = async (apiKey: string) => {
    const response = await fetch(`${gateway.url}/v1/categories`, { headers: bearer(apiKey) });
    const body = (await response.json()) as { code?: string };
    return { status: response.status, code: body.code };
  };
  const status = () => page.locator('#status').innerText();

  it('refuses a wrong token, then signs in with the keyboard only (the token in no browser storage)', async () => {
    await page.goto(consoleUrl);
    await expect.poll(() => page.locator('h1').innerText()).toBe('Sign in');
    await screenshot('sign-in');
    await expectAccessible('sign-in');
    await page.keyboard.type('not-a-token-but-long-enough-0123456789');
    await page.keyboard.press('Enter');
    await expect.poll(status).toContain('not valid');

    await tabTo('input[name=token]');
    await page.keyboard.type(OPS_TOKEN);
    await page.keyboard.press('Enter');
    await expect.poll(() => page.locator('h1').innerText()).toBe('Overview');
    await expect(page.locator('#who').innerText()).resolves.toContain('Signed in as ops');

    const [cookie] = await page.context().cookies();
    expect(cookie).toMatchObject({ name: 'tg_console', httpOnly: true, sameSite: 'Strict', path: '/admin' });
    const stored = await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }) + document.cookie);
    expect(stored).not.toContain(OPS_TOKEN);
    expect(stored).not.toContain(cookie!.value); // HttpOnly: the page's scripts cannot read it
  });

  it('creates a key with the keyboard; the secret is shown once in a dialog with a copy button', async () => {
    await tabTo('#nav a[href="#/keys"]');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.locator('h1').innerText()).toBe('Keys');
    await tabTo('form[aria-labelledby=create-h] select');
    await page.keyboard.type('tiny'); // a select picks the option typed
    await page.keyboard.press('Tab');
    await page.keyboard.type('console e2e');
    await page.keyboard.press('Tab');
    await page.keyboard.type('acme');
    await tabTo('form[aria-labelledby=create-h] button[type=submit]');
    await page.keyboard.press('Enter');
    const secret = page.locator('dialog[open] input.secret');
    await expect.poll(() => secret.inputValue()).toMatch(/^tg_[0-9a-z]{12}_/);
    key = await secret.inputValue();
    id = key.slice(3, 15);
    await expect(page.locator('dialog[open] button', { hasText: 'Copy' }).count()).resolves.toBe(1);
    await screenshot('key-created');
    await expectAccessible('secret dialog');
    await tabTo('dialog[open] button[value=done]');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.locator('table').first().innerText()).toContain(id);
    await screenshot('keys');
    await expectAccessible('keys');
    // Search by owner finds it.
    await page.locator('input[type=search]').fill('acme');
    await page.locator('form[role=search] button').click();
    await expect.poll(() => page.locator('table').first().innerText()).toContain('console e2e');
  });

  it('counts the key’s use on the overview, then its refusals and its ban', async () => {
    const firstMinute = Math.floor(Date.now() / 60_000);
    expect(await use(key)).toEqual({ status: 200, code: undefined });
    expect((await use(key)).status).toBe(200);
    if (Math.floor(Date.now() / 60_000) === firstMinute) admittedInMinute = firstMinute;
    await page.goto(`${consoleUrl}#/overview`);
    const totals = page.locator('main p.muted');
    await expect.poll(() => totals.innerText(), { timeout: 30_000 }).toMatch(/admitted [2-9]/);
    await expect.poll(() => page.locator('main').innerText()).toContain(id);

    const refusals: string[] = [];
    for (let i = 0; i < 6; i++) refusals.push((await use(key)).code ?? '');
    expect(refusals).toContain('rate_limit_exceeded');
    expect(refusals).toContain('api_key_banned');
    await expect.poll(() => totals.innerText(), { timeout: 30_000 }).toMatch(/limited [1-9].*banned [1-9]/);
    await expect.poll(() => page.locator('table', { hasText: 'Current bans' }).innerText(), { timeout: 30_000 }).toContain(id);
    await screenshot('overview');
    await expectAccessible('overview');
  });

  it('shows the key’s windows, ban and refusals, and lifts the ban after a confirmation', async () => {
    await page.goto(`${consoleUrl}#/keys/${id}`);
    await expect.poll(() => page.locator('h1').innerText()).toBe(`Key ${id}`);
    const shownInMinute = Math.floor(Date.now() / 60_000);
    const main = await page.locator('main').innerText();
    expect(main).toMatch(/This day: 2 \/ 2 used/);
    // The minute window starts again at every minute edge: its count is known only while the minute
    // of the two admissions lasts (a slow run may have crossed an edge since).
    if (shownInMinute === admittedInMinute && Math.floor(Date.now() / 60_000) === admittedInMinute) {
      expect(main).toMatch(/This minute: 2 \/ 2 used/);
    }
    await expect(page.locator('#ban-state').innerText()).resolves.toContain('Banned until');
    await expect(page.locator('#refusals').innerText()).resolves.toMatch(/[1-9]\d* refused/);
    await screenshot('key-detail-banned');
    await expectAccessible('key detail');

    await tabTo('main button:has-text("Lift ban")');
    await page.keyboard.press('Enter');
    // The confirmation opens on Cancel (the safe choice); Tab moves to the action.
    await expect.poll(() => page.evaluate(() => document.activeElement?.textContent)).toBe('Cancel');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    await expect.poll(status).toContain('lifted');
    await expect.poll(() => page.locator('#ban-state').innerText()).toBe('Not banned.');
    // The ban is gone (the gateway forgets its cached ban when the change reaches it; until then it
    // answers from memory and counts no refusal); the quota is still spent.
    await expect.poll(async () => (await use(key)).code).toBe('rate_limit_exceeded');
  });

  it('changes the plan, sets and clears an expiry, rotates with grace, and revokes', async () => {
    await page.locator('form[aria-label="Change plan"] select').selectOption('free');
    await page.locator('form[aria-label="Change plan"] button[type=submit]').click();
    await expect.poll(status).toContain('is now free');
    await expect.poll(async () => (await use(key)).status).toBe(200);

    // A month of its own, from a billing anchor: the key's facts and usage show it.
    await page.locator('form[aria-label="Set month"] input[type=number]').fill('50000');
    await page.locator('form[aria-label="Set month"] input[type=date]').fill('2026-01-31');
    await page.locator('form[aria-label="Set month"] button[type=submit]').click();
    await expect.poll(status).toContain('Month set');
    await expect.poll(() => page.locator('main').innerText()).toContain('months begin on day 31');
    await expect.poll(() => page.locator('main').innerText()).toMatch(/This month: \d+ \/ 50000 used/);

    await page.locator('form[aria-label="Set expiry"] input').fill('2099-01-31T12:00');
    await page.locator('form[aria-label="Set expiry"] button[type=submit]').click();
    await expect.poll(status).toContain('Expiry set');
    await page.locator('form[aria-label="Set expiry"] button', { hasText: 'Clear expiry' }).click();
    await expect.poll(status).toContain('Expiry cleared');

    await page.locator('form[aria-label="Rotate"] input').fill('60');
    await page.locator('form[aria-label="Rotate"] button[type=submit]').click();
    await page.locator('dialog[open] button[value=yes]').click();
    const secret = page.locator('dialog[open] input.secret');
    await expect.poll(() => secret.inputValue()).toMatch(/^tg_/);
    const rotated = await secret.inputValue();
    expect(rotated).not.toBe(key);
    await page.locator('dialog[open] button[value=done]').click();
    expect((await use(rotated)).status).toBe(200);
    expect((await use(key)).status).toBe(200); // within its grace

    // Revoke, keyboard only. First the page's reload after the rotation must be done: it replaces
    // the page, and a button focused before would be gone when Enter is pressed.
    await expect.poll(() => page.locator('main').innerText()).toContain('key.rotate');
    await tabTo('main button:has-text("Revoke key")');
    await page.keyboard.press('Enter');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    await expect.poll(status).toContain('revoked');
    await expect.poll(async () => (await use(rotated)).code).toBe('revoked_api_key');
    await screenshot('key-detail-revoked');
  });

  it('finds every change in the audit under the token’s label, filtered by key, actor and action', async () => {
    await page.goto(`${consoleUrl}#/audit`);
    await expect.poll(() => page.locator('h1').innerText()).toBe('Audit');
    await page.getByLabel('Key id').fill(id);
    await page.getByLabel('Actor').fill('ops');
    await page.locator('form[role=search] button').click();
    const rows = page.locator('tbody tr');
    await expect.poll(() => page.locator('tbody').innerText()).toContain('key.revoke');
    const text = await page.locator('tbody').innerText();
    for (const action of ['key.create', 'key.unban', 'key.update', 'key.rotate', 'key.revoke']) expect(text).toContain(action);
    expect(await rows.count()).toBe(8); // create, unban, plan, month, expiry set, expiry cleared, rotate, revoke
    expect(text).not.toContain('cli');
    await screenshot('audit');
    await expectAccessible('audit');
    await page.getByLabel('Action').selectOption('key.rotate');
    await page.locator('form[role=search] button').click();
    await expect.poll(() => rows.count()).toBe(1);
  });

  it('shows the plans read-only', async () => {
    await page.goto(`${consoleUrl}#/plans`);
    await expect.poll(() => page.locator('table').innerText()).toContain('tiny');
    await expect(page.locator('main input, main form').count()).resolves.toBe(0);
    await screenshot('plans');
    await expectAccessible('plans');
  });

  let prepaidId = '';
  it('shows a key’s prepaid balance and changes it with a reason (audited); a change below zero is refused, nothing changed', async () => {
    const created = await admin(gateway.adminUrl, 'POST', '/keys', { body: { plan: 'prepaid', name: 'credits e2e' } });
    expect(created.status).toBe(201);
    prepaidId = created.body.id as string;
    const prepaidKey = created.body.key as string;
    expect((await use(prepaidKey)).code).toBe('insufficient_credits');

    await page.goto(`${consoleUrl}#/keys/${prepaidId}`);
    const balance = page.locator('#credit-balance');
    await expect.poll(() => balance.innerText()).toBe('Balance: 0; spent by every request: its plan requires credits.');
    const form = page.locator('form[aria-label="Change credits"]');
    await form.getByLabel('Credits').fill('500');
    await form.getByLabel('Reason').fill('order 1001 paid');
    await form.locator('button[type=submit]').click();
    await expect.poll(status).toContain(`Credits of ${prepaidId}: 500`);
    await expect.poll(() => balance.innerText()).toContain('Balance: 500;');
    // The gateway spends it: one request, one credit.
    expect(await use(prepaidKey)).toEqual({ status: 200, code: undefined });
    await page.reload();
    await expect.poll(() => page.locator('#credit-balance').innerText()).toContain('Balance: 499;');

    await form.locator('select').selectOption('set');
    await form.getByLabel('Credits').fill('20');
    await form.getByLabel('Reason').fill('migrated balance');
    await form.locator('button[type=submit]').click();
    await expect.poll(() => balance.innerText()).toContain('Balance: 20;');
    await form.getByLabel('Credits').fill('-50');
    await form.getByLabel('Reason').fill('too much');
    await form.locator('select').selectOption('add');
    await form.locator('button[type=submit]').click();
    await expect.poll(status).toMatch(/below zero/i);
    await expect(balance.innerText()).resolves.toContain('Balance: 20;');
    // The key's audit trail keeps each change with its reason.
    await expect
      .poll(() => page.locator('table', { hasText: 'Audit trail' }).innerText())
      .toMatch(/key\.credits\s+credits: 499 → 20; reason: migrated balance[\s\S]*key\.credits\s+credits: 0 → 500; reason: order 1001 paid/);
    await screenshot('key-detail-credits');
    await expectAccessible('key detail with credits');
  });

  it('refuses a change without the CSRF token, even with the session cookie', async () => {
    const answer = await page.evaluate(async (keyId) => {
      const response = await fetch(`/admin/v1/keys/${keyId}/ban`, { method: 'DELETE' });
      return { status: response.status, body: await response.json() };
    }, id);
    expect(answer).toMatchObject({ status: 403, body: { code: 'invalid_csrf_token' } });
  });

  it('signs out: the session cookie no longer opens the admin API', async () => {
    await page.goto(`${consoleUrl}#/overview`);
    await page.locator('#who button', { hasText: 'Sign out' }).click();
    await expect.poll(() => page.locator('h1').innerText()).toBe('Sign in');
    const answer = await page.evaluate(async () => (await fetch('/admin/v1/keys')).status);
    expect(answer).toBe(401);
  });

  it('shows a viewer the balance, with no way to change it', async () => {
    await page.locator('input[name=token]').fill(VIEWER_TOKEN);
    await page.keyboard.press('Enter');
    await expect.poll(() => page.locator('#who').innerText()).toContain('viewer');
    await page.goto(`${consoleUrl}#/keys/${prepaidId}`);
    await expect.poll(() => page.locator('#credit-balance').innerText()).toContain('Balance: 20;');
    await expect(page.locator('form[aria-label="Change credits"]').count()).resolves.toBe(0);
    // The admin API refuses it too, for the role (not for a missing CSRF token: a bearer token needs none).
    const refused = await admin(gateway.adminUrl, 'POST', `/keys/${prepaidId}/credits`, {
      token: VIEWER_TOKEN,
      body: { add: 5, reason: 'x' },
    });
    expect([refused.status, refused.body.code]).toEqual([403, 'insufficient_role']);
  });
});
