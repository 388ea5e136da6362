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

  it('maps each token to its label; the token is everything after the first colon', () => {
    const tokens = AdminTokens.parse(`ops:${A}, portal:${B}`);
    expect(tokens.configured).toBe(true);
    expect(tokens.labelOf(A)).toBe('ops');
    expect(tokens.labelOf(B)).toBe('portal');
    expect(tokens.labelOf(`ops:${A}`)).toBeNull();
    expect(tokens.labelOf(A.slice(1))).toBeNull();
    expect(tokens.labelOf('')).toBeNull();
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
