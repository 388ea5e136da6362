import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AdminTokens } from '../../src/admin/admin-tokens.js';
import { ConfigError } from '../../src/config/config-error.js';

const A = 'a'.repeat(32);
const B = 'b:with:colons-0123456789abcdefghijkl';

function refusal(value: string): ConfigError {
  try {
    AdminTokens.parse(value);
  } catch (err) {
    return err as ConfigError;
  }
  throw new Error('expected a refusal');
}

describe('TOLLGATE_ADMIN_TOKENS', () => {
  it('is not configured when unset or empty', () => {
    expect(AdminTokens.parse(undefined).configured).toBe(false);
    expect(AdminTokens.parse(' , ').configured).toBe(false);
  });

  it('maps each label:token to an admin of that label; the token is everything after the first colon', () => {
    const tokens = AdminTokens.parse(`ops:${A}, portal:${B}`);
    expect(tokens.configured).toBe(true);
    expect(tokens.principalOf(A)).toEqual({ actor: 'ops', role: 'admin' });
    expect(tokens.principalOf(B)).toEqual({ actor: 'portal', role: 'admin' });
    expect(tokens.principalOf(`ops:${A}`)).toBeNull();
    expect(tokens.principalOf(A.slice(1))).toBeNull();
    expect(tokens.principalOf('')).toBeNull();
  });

  it('gives label:role:token its role and label:role:owner:token its owner too', () => {
    const C = 'c'.repeat(32);
    const tokens = AdminTokens.parse(`support:viewer:${A},billing:operator:${B.replace(/:/g, '')},acme:operator:acme-corp:${C}`);
    expect(tokens.principalOf(A)).toEqual({ actor: 'support', role: 'viewer' });
    expect(tokens.principalOf(B.replace(/:/g, ''))).toEqual({ actor: 'billing', role: 'operator' });
    expect(tokens.principalOf(C)).toEqual({ actor: 'acme', role: 'operator', owner: 'acme-corp' });
    expect(tokens.principalOf(`acme-corp:${C}`)).toBeNull();
  });

  it('refuses a bad owner or a colon in a role entry’s token, never echoing the token', () => {
    expect(refusal(`acme:viewer:Acme Corp:${A}`).message).toMatch(/entry 1 \(acme\): the owner must be/);
    const err = refusal(`acme:viewer:acme:${A}:more`);
    expect(err.message).toMatch(/the token cannot contain ":"/);
    expect(err.message).not.toContain(A);
    expect(refusal(`acme:viewer:acme:short`).message).toMatch(/at least 32 bytes/);
  });

  it('refuses a token under 32 bytes, naming the entry and never the token', () => {
    const err = refusal(`ops:${A},short:tooShortSecret123`);
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.message).toMatch(/^environment: TOLLGATE_ADMIN_TOKENS: entry 2 \(short\): the token must be at least 32 bytes/);
    expect(err.message).not.toContain('tooShortSecret123');
  });

  it('refuses an entry without a label, without echoing it', () => {
    const err = refusal(A);
    expect(err.message).toMatch(/entry 1 must be label:token/);
    expect(err.message).not.toContain(A);
    expect(refusal(`Ops Team:${A}`).message).toMatch(/must be label:token/);
  });

  it('refuses a label used twice', () => {
    expect(refusal(`ops:${A},ops:${'c'.repeat(32)}`).message).toMatch(/label ops is used twice/);
  });
});

describe('TOLLGATE_ADMIN_TOKENS_FILE', () => {
  const sha256 = (token: string) => createHash('sha256').update(token).digest('hex');
  const file = (text: string) => {
    const path = join(mkdtempSync(join(tmpdir(), 'tollgate-tokens-')), 'admin-tokens.yaml');
    writeFileSync(path, text);
    return path;
  };
  const refusalOf = (env: NodeJS.ProcessEnv) => {
    try {
      AdminTokens.fromEnvironment(env);
    } catch (err) {
      return (err as Error).message;
    }
    return 'accepted';
  };

  it('adds its hashed tokens, with their roles and owners, to those of the variable', () => {
    const path = file(
      `tokens:\n  - { label: dana, role: viewer, sha256: ${sha256(A)} }\n  - { label: acme, role: operator, owner: acme, sha256: ${sha256(B)} }\n`,
    );
    const tokens = AdminTokens.fromEnvironment({ TOLLGATE_ADMIN_TOKENS: `ops:${'c'.repeat(32)}`, TOLLGATE_ADMIN_TOKENS_FILE: path });
    expect(tokens.principalOf(A)).toEqual({ actor: 'dana', role: 'viewer' });
    expect(tokens.principalOf(B)).toEqual({ actor: 'acme', role: 'operator', owner: 'acme' });
    expect(tokens.principalOf('c'.repeat(32))).toEqual({ actor: 'ops', role: 'admin' });
    expect(tokens.principalOf(sha256(A))).toBeNull();
  });

  it('refuses a bad entry naming the file and the field, and a label used twice', () => {
    expect(refusalOf({ TOLLGATE_ADMIN_TOKENS_FILE: file(`tokens:\n  - { label: dana, role: root, sha256: ${sha256(A)} }\n`) })).toMatch(
      /^admin-tokens\.yaml: tokens\.0\.role: must be viewer, operator or admin/,
    );
    expect(refusalOf({ TOLLGATE_ADMIN_TOKENS_FILE: file(`tokens:\n  - { label: dana, role: viewer, sha256: ${A} }\n`) })).toMatch(
      /tokens\.0\.sha256: must be the token’s SHA-256/,
    );
    expect(
      refusalOf({
        TOLLGATE_ADMIN_TOKENS: `dana:${A}`,
        TOLLGATE_ADMIN_TOKENS_FILE: file(`tokens:\n  - { label: dana, role: viewer, sha256: ${sha256(B)} }\n`),
      }),
    ).toMatch(/label dana is used twice/);
    expect(refusalOf({ TOLLGATE_ADMIN_TOKENS_FILE: '/nonexistent/admin-tokens.yaml' })).toMatch(/cannot read/);
  });
});
