import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

const found = new Map<string, string>();

/**
 * The path of a load generator the benchmark runs (wrk, h2load): `$ENV_VAR` when set, else the
 * first executable `name` on PATH; remembered once found. Throws `missing` (how to install it)
 * when there is none.
 */
export function requireExecutable(name: string, envVar: string, missing: string): string {
  const known = found.get(name);
  if (known) return known;
  const override = process.env[envVar];
  const candidates = override ? [override] : (process.env.PATH ?? '').split(delimiter).map((dir) => join(dir, name));
  for (const candidate of candidates) {
    try {
      accessSync(candidate, constants.X_OK);
      found.set(name, candidate);
      return candidate;
    } catch {
      // not this one
    }
  }
  throw new Error(missing);
}
