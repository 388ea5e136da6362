import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/processes.js';
import { configCopy } from '../helpers/stack.js';

// `tollgate check-config` (a real process) on plans.yaml's `services`: a service the plan names
// must be one gateway.yaml defines, or `default`. One line naming file and field, non-zero exit.

const fixture = fileURLToPath(new URL('../fixtures/config-plan-unknown-service', import.meta.url));

describe('check-config on plans per service', () => {
  it('refuses a plan naming a service gateway.yaml does not define', async () => {
    const result = await runCli(['check-config', fixture], {});
    expect(result.code, result.stderr).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe(
      'tollgate: plans.yaml: plans.pets.services.2: service "dogs" is not defined in gateway.yaml (its services, or "default" for upstream.url) (line 4)\n',
    );
  });

  it('accepts a plan naming defined services and `default`', async () => {
    const dir = configCopy({
      'gateway.yaml': (t) =>
        t.replace(/^services: \[\][^\n]*\n/m, 'services:\n  - { name: cats, paths: [/v1/cats], targets: [http://127.0.0.1:8082] }\n'),
      'plans.yaml': (t) => t.replace(/^( {2}free: +\{ perMinute: 60, +perDay: 1000) \}/m, '$1, services: [default, cats] }'),
    });
    const result = await runCli(['check-config', dir], {});
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/\nconfig OK: .*\(plans: free, pro, business, enterprise\)\n$/);
  });

  it('refuses a malformed or empty services list, naming the field', async () => {
    for (const [services, reason] of [
      ['[Cats]', 'a service name is 1-32 of a-z 0-9 _ -'],
      ['[]', 'services must name at least one service (leave it out to allow every service)'],
      ['[default, default]', 'services lists a service twice'],
    ] as const) {
      const dir = configCopy({
        'plans.yaml': (t) => t.replace(/^( {2}free: +\{ perMinute: 60, +perDay: 1000) \}/m, `$1, services: ${services} }`),
      });
      const result = await runCli(['check-config', dir], {});
      expect(result.code, result.stderr).toBe(1);
      expect(result.stderr).toMatch(
        new RegExp(`^tollgate: plans\\.yaml: plans\\.free\\.services(\\.0)?: ${reason.replace(/[()[\]]/g, '\\$&')} \\(line \\d+\\)\\n$`),
      );
    }
  });
});
