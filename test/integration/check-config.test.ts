import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { lineOf } from '../helpers/config-lines.js';
import { CONFIG_DIR, runCli } from '../helpers/processes.js';

// `tollgate check-config [DIR]` run as a real process against the shipped config and against
// fixture directories that each hold a copy of the shipped files with exactly one defect.

const fixture = (name: string) => fileURLToPath(new URL(`../fixtures/config-${name}`, import.meta.url));

/** Runs check-config on a fixture dir and returns its output after the checks every failure shares. */
async function expectRefused(name: string, env: Record<string, string> = {}): Promise<string> {
  const result = await runCli(['check-config', fixture(name)], env);
  expect(result.code, `stderr: ${result.stderr}`).not.toBe(0);
  expect(result.stdout).toBe('');
  expect(result.stderr).toMatch(/^tollgate: /);
  // One clear line per failure, not a stack trace.
  expect(result.stderr).not.toMatch(/\n\s+at /);
  return result.stderr;
}

describe('check-config on the shipped config', () => {
  it('accepts config/ and says OK', async () => {
    const result = await runCli(['check-config', CONFIG_DIR], {});
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/\bOK\b/);
    expect(result.stdout).toContain('free');
    expect(result.stdout).toContain('enterprise');
  });

  it('defaults to $TOLLGATE_CONFIG_DIR when no directory is given', async () => {
    const ok = await runCli(['check-config'], { TOLLGATE_CONFIG_DIR: CONFIG_DIR });
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/\bOK\b/);

    const refused = await runCli(['check-config'], { TOLLGATE_CONFIG_DIR: fixture('negative-per-minute') });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('plans.free.perMinute');
  });
});

describe('check-config refuses a broken plans.yaml, naming file and field', () => {
  it('refuses a negative perMinute and names plans.free.perMinute', async () => {
    const stderr = await expectRefused('negative-per-minute');
    expect(stderr).toContain('plans.yaml');
    expect(stderr).toContain('plans.free.perMinute');
  });

  it('refuses a perDay lower than perMinute and names perDay', async () => {
    const stderr = await expectRefused('per-day-below-per-minute');
    expect(stderr).toContain('plans.yaml');
    expect(stderr).toContain('plans.pro.perDay');
  });

  it('refuses a perMonth lower than perDay and names perMonth', async () => {
    const stderr = await expectRefused('per-month-below-per-day');
    expect(stderr).toContain('plans.yaml');
    expect(stderr).toContain('plans.pro.perMonth');
  });

  it('refuses an unknown field in a plan and names it', async () => {
    const stderr = await expectRefused('unknown-plan-field');
    expect(stderr).toContain('plans.yaml');
    expect(stderr).toContain('plans.business');
    expect(stderr).toContain('perHour');
  });

  it('refuses a plans.yaml without the ban section and names ban', async () => {
    const stderr = await expectRefused('missing-ban');
    expect(stderr).toContain('plans.yaml');
    expect(stderr).toMatch(/\bban\b/);
  });

  it('refuses invalid YAML syntax and says so', async () => {
    const stderr = await expectRefused('invalid-yaml');
    expect(stderr).toContain('plans.yaml');
    expect(stderr).toMatch(/YAML/);
  });

  it('refuses a plan name that is not lowercase letters, digits, "-" or "_" and names it', async () => {
    const stderr = await expectRefused('bad-plan-name');
    expect(stderr).toContain('plans.yaml');
    expect(stderr).toContain('Free Plan');
  });

  it('refuses a directory without plans.yaml and names the file', async () => {
    const stderr = await expectRefused('missing-plans');
    expect(stderr).toContain('plans.yaml');
  });
});

describe('check-config refuses a broken gateway.yaml, naming file and field', () => {
  it('refuses an unknown top-level key and names it', async () => {
    const stderr = await expectRefused('gateway-unknown-key');
    expect(stderr).toContain('gateway.yaml');
    expect(stderr).toContain('tracing');
  });

  it('refuses a non-http upstream.url and names upstream.url', async () => {
    const stderr = await expectRefused('gateway-ftp-upstream');
    expect(stderr).toContain('gateway.yaml');
    expect(stderr).toContain('upstream.url');
  });

  it('refuses a time zone that is not an IANA name and names quota.timeZone', async () => {
    const stderr = await expectRefused('bad-time-zone');
    expect(stderr).toContain('gateway.yaml');
    expect(stderr).toContain('quota.timeZone');
  });

  it('refuses gateway.port 70000 and names gateway.port', async () => {
    const stderr = await expectRefused('gateway-port-out-of-range');
    expect(stderr).toContain('gateway.yaml');
    expect(stderr).toContain('gateway.port');
  });
});

describe('check-config reports every mistake, each with its file, field and line', () => {
  const lineIn = (name: string, file: string, text: string) => lineOf(readFileSync(join(fixture(name), file), 'utf8'), text);

  it('lists the mistakes of gateway.yaml and plans.yaml together, one line each', async () => {
    const stderr = await expectRefused('several-mistakes');
    const at = (file: string, text: string) => `(line ${lineIn('several-mistakes', file, text)})`;
    const lines = stderr.trimEnd().split('\n');
    expect(lines).toHaveLength(5);
    expect(lines[0]).toMatch(/^tollgate: gateway\.yaml: gateway\.port: .*65535/);
    expect(lines[0]).toContain(at('gateway.yaml', 'port: 70000'));
    expect(lines[1]).toMatch(/^gateway\.yaml: redis: .*commandTimeoutMS/);
    expect(lines[1]).toContain(at('gateway.yaml', 'commandTimeoutMS:'));
    expect(lines[2]).toMatch(/^plans\.yaml: plans\.free\.perMinute: perMinute must be at least 1/);
    expect(lines[2]).toContain(at('plans.yaml', 'perMinute: -5'));
    expect(lines[3]).toMatch(/^plans\.yaml: plans\.business: .*perHour/);
    expect(lines[3]).toContain(at('plans.yaml', 'perHour: 5000'));
    expect(lines[4]).toMatch(/^plans\.yaml: ban\.duration: duration must be at least 1/);
    expect(lines[4]).toContain(at('plans.yaml', 'duration: -900'));
  });

  it('gives the line of a single mistake too', async () => {
    const stderr = await expectRefused('negative-per-minute');
    expect(stderr).toContain(
      `plans.yaml: plans.free.perMinute: perMinute must be at least 1 (line ${lineIn('negative-per-minute', 'plans.yaml', 'perMinute: -5')})`,
    );
  });

  it('refuses invalid YAML with the line of the error', async () => {
    const stderr = await expectRefused('invalid-yaml');
    expect(stderr).toMatch(/plans\.yaml: not valid YAML: .* \(line \d+\)/);
  });
});

describe('check-config validates the environment overrides', () => {
  it('refuses GATEWAY_PORT=abc and names GATEWAY_PORT', async () => {
    const result = await runCli(['check-config', CONFIG_DIR], { GATEWAY_PORT: 'abc' });
    expect(result.code).not.toBe(0);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('GATEWAY_PORT');
    expect(result.stderr).toContain('abc');
  });

  it('refuses an out-of-range ADMIN_PORT and names ADMIN_PORT', async () => {
    const result = await runCli(['check-config', CONFIG_DIR], { ADMIN_PORT: '65536' });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('ADMIN_PORT');
  });

  it('refuses a non-http UPSTREAM_URL and names UPSTREAM_URL', async () => {
    const result = await runCli(['check-config', CONFIG_DIR], { UPSTREAM_URL: 'ftp://x' });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('UPSTREAM_URL');
  });
});
