// Test defaults over the shared process harness (test/harness/, which the benchmark uses too):
// every test process gets LOG_LEVEL info (tests wait for log lines) and the tests' assertion secret.
import { NodeProcess } from '../harness/node-process.js';
import { runCli as runHarnessCli, startTollgate } from '../harness/tollgate.js';
import { TEST_ASSERTION_SECRET } from './assertion.js';

export { CLI, CONFIG_DIR, REPO_ROOT } from '../harness/tollgate.js';

type Env = Record<string, string | undefined>;

/** What every test process gets unless the test says otherwise. */
export const TEST_PROCESS_ENV: Env = { LOG_LEVEL: 'info', TOLLGATE_ASSERTION_SECRET: TEST_ASSERTION_SECRET };

/** A tollgate process (gateway, backend, up) started from the built CLI, spoken to over HTTP. */
export type TollgateProcess = NodeProcess;
export const TollgateProcess = {
  spawn(args: string[], env: Env): TollgateProcess {
    return startTollgate(args, { ...TEST_PROCESS_ENV, ...env });
  },
};

/** Runs the CLI to completion (for `keys …` and `check-config`). */
export function runCli(args: string[], env: Env): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runHarnessCli(args, { TOLLGATE_ASSERTION_SECRET: TEST_ASSERTION_SECRET, ...env });
}
