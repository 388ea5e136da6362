import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The config/ shipped beside dist/ in the npm package and the image: the defaults `tollgate up` runs on. */
export const SHIPPED_CONFIG_DIR = fileURLToPath(new URL('../../config', import.meta.url));

/**
 * The config directory, first that applies: `TOLLGATE_CONFIG_DIR`; `./config` when it holds a
 * gateway.yaml (a config/ folder of some other tool does not count); the shipped defaults. So a
 * package installed into an empty folder runs as it is, and a folder with its own config wins.
 * Imports nothing of the schemas: upstream-tls.ts reads PEM files relative to it too.
 */
export function configDirFrom(env: NodeJS.ProcessEnv, cwd = process.cwd()): string {
  if (env.TOLLGATE_CONFIG_DIR) return resolve(cwd, env.TOLLGATE_CONFIG_DIR);
  const local = resolve(cwd, 'config');
  return existsSync(join(local, 'gateway.yaml')) ? local : SHIPPED_CONFIG_DIR;
}
