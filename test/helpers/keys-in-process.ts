import { keysCommand } from '../../src/cli/keys-command.js';

/**
 * `tollgate keys …` run inside the test worker: the command module the binary runs
 * (src/cli/keys-command.ts), on the same Redis and config directory, without starting Node and
 * loading the CLI's modules for every call (close to a second of CPU each, and the suite makes
 * hundreds of keys on two cores). For keys a test needs; the CLI itself is tested as the real
 * binary (test/integration/keys-cli.test.ts and the keysCli calls).
 */
export async function keysInProcess(args: string[], env: Record<string, string | undefined>): Promise<string> {
  let stdout = '';
  await keysCommand(args, env, { out: (text) => (stdout += text.endsWith('\n') ? text : `${text}\n`) });
  return stdout;
}
