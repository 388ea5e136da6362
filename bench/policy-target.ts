import { join } from 'node:path';
import { REPO_ROOT } from '../test/harness/tollgate.js';
import { editedConfig, replaceLine } from './config-edit.js';

/**
 * `tollgate-policies` (docs/plugins.md, "Cost"): tollgate with one configured no-op policy hooking
 * every phase (bench/policies/no-op.js). Beside `tollgate` in the same rounds, its CPU per request
 * is what the policy interface costs a request: a context, the phase runners, the after-answer turn.
 */
export const POLICY_TARGET = 'tollgate-policies';

export function policyConfig(suffix: string): string {
  const entry = `policies: [{ use: ${join(REPO_ROOT, 'bench', 'policies', 'no-op.js')} }]`;
  return editedConfig(`${POLICY_TARGET}${suffix}`, { 'gateway.yaml': replaceLine(/^policies: \[\].*$/m, entry) });
}
