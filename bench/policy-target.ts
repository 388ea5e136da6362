import { dirname, join, resolve } from 'node:path';
import { REPO_ROOT } from '../test/harness/tollgate.js';
import { editedConfig, replaceLine } from './config-edit.js';

/**
 * `tollgate-policies` (docs/plugins.md, "Cost"): tollgate with one configured no-op policy hooking
 * every phase (bench/policies/no-op.js). Beside `tollgate` in the same rounds, its CPU per request
 * is what the policy interface costs a request: a context, the phase runners, the after-answer turn.
 */
export const POLICY_TARGET = 'tollgate-policies';

/**
 * `name`'s config: this checkout's, or with `cli` another build's own (`<build>-policies` for each
 * --compare build: the same policy on the code before a change). The policy's code is this
 * checkout's; its `definePolicy` only returns what it is given, so any build can load it.
 */
export function policyConfig(name: string, cli?: string): string {
  const entry = `policies: [{ use: ${join(REPO_ROOT, 'bench', 'policies', 'no-op.js')} }]`;
  const from = cli ? resolve(dirname(cli), '../../config') : undefined;
  return editedConfig(name, { 'gateway.yaml': replaceLine(/^policies: \[\].*$/m, entry) }, from);
}
