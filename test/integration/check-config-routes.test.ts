import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CONFIG_DIR, runCli } from '../helpers/processes.js';

// `tollgate check-config` (a real process) on the route rules, the OpenAPI file and the assertion
// secret: one line naming file (or variable) and field, non-zero exit.

const fixture = (name: string) => fileURLToPath(new URL(`../fixtures/config-routes-${name}`, import.meta.url));

async function refused(dir: string, env: Record<string, string | undefined> = {}): Promise<string> {
  const result = await runCli(['check-config', dir], env);
  expect(result.code, result.stderr).toBe(1);
  expect(result.stdout).toBe('');
  expect(result.stderr.trim().split('\n')).toHaveLength(1);
  return result.stderr;
}

describe('check-config on route rules', () => {
  it('refuses a sunset earlier than the deprecation', async () => {
    expect(await refused(fixture('sunset-before-deprecation'))).toBe(
      'tollgate: gateway.yaml: routes.deprecations.0.sunsetAt: must not be earlier than deprecatedAt (line 7)\n',
    );
  });

  it('refuses a malformed date', async () => {
    expect(await refused(fixture('malformed-date'))).toMatch(
      /^tollgate: gateway\.yaml: routes\.deprecations\.0\.deprecatedAt: must be an ISO 8601 date-time/,
    );
  });

  it('refuses a malformed path pattern', async () => {
    expect(await refused(fixture('malformed-pattern'))).toMatch(
      /^tollgate: gateway\.yaml: routes\.deprecations\.0\.path: segment "\{petId"/,
    );
  });

  it('refuses a bad method', async () => {
    expect(await refused(fixture('bad-method'))).toMatch(/^tollgate: gateway\.yaml: routes\.deprecations\.0\.method: .*"GET"/);
  });
});

describe('check-config on the rest of issue 4', () => {
  it('refuses a short TOLLGATE_ASSERTION_SECRET, naming it', async () => {
    expect(await refused(CONFIG_DIR, { TOLLGATE_ASSERTION_SECRET: 'short' })).toMatch(
      /^tollgate: environment: TOLLGATE_ASSERTION_SECRET: must be at least 32 bytes/,
    );
  });

  it('warns (and passes) when no assertion secret is set', async () => {
    const result = await runCli(['check-config', CONFIG_DIR], { TOLLGATE_ASSERTION_SECRET: undefined });
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/OK/);
    expect(result.stderr).toMatch(/^tollgate: warning: TOLLGATE_ASSERTION_SECRET is unset/);
  });
});
