// The benchmark's side of the shared process harness (test/harness/): a scratch directory per run
// for process logs, Redis and profiles, and the CLI run to completion.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CLI, runCli } from '../test/harness/tollgate.js';

let scratch: string | undefined;

/** The run's scratch directory (process logs, Redis, profiles), made on first use. */
export function workDir(): string {
  scratch ??= mkdtempSync(join(tmpdir(), 'tollgate-bench-'));
  return scratch;
}

export function removeWorkDir(): void {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
  scratch = undefined;
}

/** Where a benchmark process's stdout and stderr go. */
export const logFileOf = (name: string) => join(workDir(), `${name}.log`);

/** Runs the tollgate CLI to completion and returns its stdout (throws on a non-zero exit). */
export async function runCliOrThrow(args: string[], env: Record<string, string | undefined>, cli = CLI): Promise<string> {
  const { code, stdout, stderr } = await runCli(args, env, cli);
  if (code !== 0) throw new Error(`tollgate ${args.join(' ')}: exit ${code}\n${stderr}`);
  return stdout;
}
