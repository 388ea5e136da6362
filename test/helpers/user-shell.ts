import { execFile } from 'node:child_process';
import { delimiter, dirname, join } from 'node:path';
import { promisify } from 'node:util';

export const run = promisify(execFile);

/**
 * The environment of a user's shell: this Node first on PATH (the bin's `#!/usr/bin/env node`
 * finds it), and none of the `npm_*` variables `npm test` sets, which would point npm at this
 * repository (its prefix, its config) instead of the empty folder.
 */
export function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (!/^npm_/i.test(name) && !name.startsWith('TOLLGATE_') && !name.startsWith('REDIS_')) env[name] = value;
  }
  env.PATH = `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ''}`;
  return { ...env, ...extra };
}

/**
 * `npm pack` of the package in `dir` into `into`; the tarball's path. --ignore-scripts: `npm test`
 * has just built dist/, and `prepack` would rebuild it under the integration tests running beside.
 */
export async function packInto(dir: string, into: string): Promise<string> {
  const packed = await run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', into], {
    cwd: dir,
    env: userEnv(),
    maxBuffer: 16 * 1024 * 1024,
  });
  return join(into, (JSON.parse(packed.stdout) as Array<{ filename: string }>)[0]!.filename);
}
