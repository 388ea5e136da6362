import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

/** Where `name` is on PATH, or undefined. */
export function commandPath(name: string): string | undefined {
  return spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).stdout.trim() || undefined;
}

/**
 * A describe block that needs a tool this machine may lack; `missing` says why it cannot run
 * (undefined: it can). Without the tool it is skipped, saying so; but under CI=true, where .ci/run
 * installs every tool, a missing one fails instead: CI never runs less than it appears to.
 */
export function describeNeeding(missing: string | undefined, title: string, body: () => void): void {
  if (!missing) {
    describe(title, body);
  } else if (process.env.CI === 'true') {
    describe(title, () => it('has what it needs (.ci/run installs it)', () => expect.fail(missing)));
  } else {
    console.warn(`SKIPPED ${title}: ${missing}`);
    describe.skip(`${title} (skipped: ${missing})`, body);
  }
}
