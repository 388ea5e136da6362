import { accessSync, constants } from 'node:fs';
import { commandPath } from '../test/helpers/needs-tool.js';

const found = new Map<string, string>();

/**
 * The path of a load generator the benchmark runs (wrk, h2load): `$ENV_VAR` when set, else `name`
 * on PATH (commandPath, as the tests find their tools); remembered once found. Throws `missing`
 * (how to install it) when there is none.
 */
export function requireExecutable(name: string, envVar: string, missing: string): string {
  const known = found.get(name);
  if (known) return known;
  const candidate = process.env[envVar] || commandPath(name);
  if (!candidate || !executable(candidate)) throw new Error(missing);
  found.set(name, candidate);
  return candidate;
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
