import { describe, expect, it } from 'vitest';
import { gatewayFileSchema } from '../../src/config/gateway-schema.js';
import { validated } from '../../src/config/load.js';
import { consolePrincipal } from '../../src/console/oidc/console-principal.js';
import { PENDING_MS, PendingSignIns } from '../../src/console/oidc/pending-sign-ins.js';
import { consoleReturnPath } from '../../src/console/oidc/return-path.js';

// The console's OpenID sign-in, its pure parts: the `console.oidc` section of gateway.yaml, the
// claims → principal mapping, the return path, and the sign-ins under way. The flow end to end:
// test/integration/console-oidc.test.ts.

const oidc = (extra: Record<string, unknown> = {}) => ({
  issuer: 'https://idp.example/realms/ops',
  clientId: 'tollgate-console',
  clientSecretEnv: 'TOLLGATE_CONSOLE_OIDC_SECRET',
  redirectUri: 'https://ops.example/admin/console/oidc/callback',
  roles: { 'tollgate-viewers': 'viewer', 'tollgate-operators': 'operator', partners: 'operator' },
  ownerClaim: 'tollgate_owner',
  ...extra,
});
const load = (settings: object) => validated('gateway.yaml', gatewayFileSchema, { console: { oidc: settings } }).console.oidc!;
const refusal = (settings: object) => {
  try {
    load(settings);
  } catch (err) {
    return (err as Error).message;
  }
  return 'accepted';
};

describe('console.oidc in gateway.yaml', () => {
  it('takes the documented example with its defaults', () => {
    expect(load(oidc())).toMatchObject({ roleClaim: 'groups', scopes: ['email', 'profile'] });
    expect(validated('gateway.yaml', gatewayFileSchema, {}).console.oidc).toBeUndefined();
  });

  it('refuses what would not work or not be safe, naming the field', () => {
    expect(refusal(oidc({ roles: { x: 'root' } }))).toMatch(/gateway\.yaml: console\.oidc\.roles\.x: must be viewer, operator or admin/);
    expect(refusal(oidc({ roles: {} }))).toMatch(/console\.oidc\.roles: must map at least one/);
    expect(refusal(oidc({ issuer: 'http://idp.example' }))).toMatch(/console\.oidc\.issuer: must be https/);
    expect(refusal(oidc({ redirectUri: 'https://ops.example/elsewhere' }))).toMatch(/console\.oidc\.redirectUri: must end in/);
    expect(refusal(oidc({ clientSecretEnv: 'the secret itself' }))).toMatch(
      /console\.oidc\.clientSecretEnv: must be an environment variable name/,
    );
    expect(refusal(oidc({ clientSecret: 'x' }))).toMatch(/console\.oidc/);
  });
});

describe('the principal of an ID token', () => {
  const config = load(oidc());
  it('takes the strongest role any claim value maps to, the subject, email and owner', () => {
    expect(consolePrincipal({ sub: 's1', email: 'a@b.test', groups: ['tollgate-viewers', 'tollgate-operators'] }, config)).toEqual({
      actor: 's1',
      email: 'a@b.test',
      role: 'operator',
    });
    expect(consolePrincipal({ sub: 's2', groups: 'partners', tollgate_owner: 'acme' }, config)).toEqual({
      actor: 's2',
      role: 'operator',
      owner: 'acme',
    });
  });

  it('gives no principal without a mapped role, or with an owner that names no owner', () => {
    expect(consolePrincipal({ sub: 's3', groups: ['sales'] }, config)).toBeNull();
    expect(consolePrincipal({ sub: 's3' }, config)).toBeNull();
    expect(consolePrincipal({ sub: 's4', groups: ['partners'], tollgate_owner: ['acme'] }, config)).toBeNull();
    expect(consolePrincipal({ sub: 's4', groups: ['partners'], tollgate_owner: 'Acme Corp' }, config)).toBeNull();
    expect(consolePrincipal({ sub: 's5', groups: ['toString', '__proto__'] }, config)).toBeNull();
  });
});

describe('the return path', () => {
  it('keeps a path of the console, and sends anything else nowhere', () => {
    expect(consoleReturnPath(undefined)).toBe('/admin/console/');
    expect(consoleReturnPath('/admin/console/#/keys/abc')).toBe('/admin/console/#/keys/abc');
    for (const bad of [
      'https://evil.example/',
      '//evil.example/',
      '/admin/console/../../x',
      '/admin/console/\\\\evil',
      '/admin/consolex',
      '/admin/console/\nx',
      'javascript:x',
    ])
      expect(consoleReturnPath(bad), bad).toBeNull();
  });
});

describe('sign-ins under way', () => {
  it('hands each state out once, and not after it got too old', () => {
    let nowMs = 1_000_000;
    const pending = new PendingSignIns(() => nowMs);
    const a = pending.start('/admin/console/');
    expect(pending.take(a.state)).toMatchObject({ nonce: a.nonce, returnTo: '/admin/console/' });
    expect(pending.take(a.state)).toBeUndefined();
    const b = pending.start('/admin/console/');
    nowMs += PENDING_MS;
    expect(pending.take(b.state)).toBeUndefined();
  });
});
