import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/config-error.js';
import { assertionSecretsFromEnv, DEVELOPMENT_SECRET } from '../../src/identity/assertion-secrets.js';
import { kidOf } from '../helpers/assertion.js';

const GOOD = 'x'.repeat(32);

describe('assertion secrets from the environment', () => {
  it('uses TOLLGATE_ASSERTION_SECRET, with a kid that fingerprints it', () => {
    const secrets = assertionSecretsFromEnv({ TOLLGATE_ASSERTION_SECRET: GOOD });
    expect(secrets.source).toBe('environment');
    expect(Buffer.from(secrets.current.bytes).toString()).toBe(GOOD);
    expect(secrets.current.kid).toBe(kidOf(GOOD));
    expect(secrets.previous).toBeUndefined();
  });

  it('refuses a secret shorter than 32 bytes, naming the variable', () => {
    for (const [name, env] of [
      ['TOLLGATE_ASSERTION_SECRET', { TOLLGATE_ASSERTION_SECRET: 'x'.repeat(31) }],
      ['TOLLGATE_ASSERTION_SECRET_PREVIOUS', { TOLLGATE_ASSERTION_SECRET: GOOD, TOLLGATE_ASSERTION_SECRET_PREVIOUS: 'short' }],
    ] as const) {
      const err = (() => {
        try {
          assertionSecretsFromEnv(env);
        } catch (e) {
          return e;
        }
      })();
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).field).toBe(name);
      expect((err as ConfigError).message).toMatch(/at least 32 bytes/);
    }
  });

  it('counts bytes, not characters', () => {
    expect(() => assertionSecretsFromEnv({ TOLLGATE_ASSERTION_SECRET: 'é'.repeat(16) })).not.toThrow();
  });

  it('keeps the previous secret for verification during a rotation', () => {
    const secrets = assertionSecretsFromEnv({ TOLLGATE_ASSERTION_SECRET: GOOD, TOLLGATE_ASSERTION_SECRET_PREVIOUS: 'y'.repeat(40) });
    expect(secrets.previous?.kid).toBe(kidOf('y'.repeat(40)));
    expect(secrets.previous?.kid).not.toBe(secrets.current.kid);
  });

  it('refuses to run without a secret, or on the public default, outside development', () => {
    for (const env of [
      {},
      { TOLLGATE_ASSERTION_SECRET: '' },
      { TOLLGATE_ASSERTION_SECRET: DEVELOPMENT_SECRET },
      { TOLLGATE_DEV: 'true' },
    ]) {
      expect(() => assertionSecretsFromEnv(env), JSON.stringify(env)).toThrow(/TOLLGATE_ASSERTION_SECRET: .*TOLLGATE_DEV=1/);
    }
  });

  it('falls back to the public development default when unset in development (TOLLGATE_DEV=1)', () => {
    const secrets = assertionSecretsFromEnv({ TOLLGATE_DEV: '1' });
    expect(secrets.source).toBe('development-default');
    expect(secrets.current.kid).toBe(kidOf(DEVELOPMENT_SECRET));
    expect(assertionSecretsFromEnv({ TOLLGATE_DEV: '1', TOLLGATE_ASSERTION_SECRET: DEVELOPMENT_SECRET }).source).toBe(
      'development-default',
    );
    expect(assertionSecretsFromEnv({}, { allowDevelopment: true }).source).toBe('development-default');
  });

  it('generates a random per-process secret when asked (tollgate up)', () => {
    const a = assertionSecretsFromEnv({}, { generate: true });
    const b = assertionSecretsFromEnv({}, { generate: true });
    expect(a.source).toBe('generated');
    expect(a.current.bytes).toHaveLength(32);
    expect(a.current.kid).not.toBe(b.current.kid);
    expect(assertionSecretsFromEnv({ TOLLGATE_ASSERTION_SECRET: GOOD }, { generate: true }).source).toBe('environment');
  });
});
