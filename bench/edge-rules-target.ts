import { dirname, resolve } from 'node:path';
import { editedConfig, replaceLine, withService } from './config-edit.js';

/**
 * `tollgate-edge-rules` (docs/plugins.md, "Cost"): tollgate with the gateway's own policies that
 * run on the policy interface all in force on the benchmarked path: a global `ipRules` deny list,
 * and a service with its own `ipRules`, `requestHeaders` and `responseHeaders` (none of them
 * refusing the run's requests). Every `--compare`/`--variant` build gets the same target from its
 * own config/, as `<build>-edge-rules`, so the report sets the interface against the code before it.
 */
export const EDGE_RULES_TARGET = 'tollgate-edge-rules';

export function edgeRulesConfig(name: string, path: string, upstreamUrl: string, cli?: string): string {
  const service = [
    'name: bench',
    `paths: [${path}]`,
    `targets: [${upstreamUrl}]`,
    'ipRules: { deny: [192.0.2.0/24] }',
    'requestHeaders: { set: { x-bench: "1", x-caller: "${consumer.id}" }, remove: [x-debug] }',
    'responseHeaders: { set: { x-served-by: tollgate }, remove: [x-powered-by] }',
  ];
  const from = cli ? resolve(dirname(cli), '../../config') : undefined;
  return editedConfig(
    name,
    {
      'gateway.yaml': (yaml) =>
        withService(service)(replaceLine(/^ {2}deny: \[\].*$/m, '  deny: [203.0.113.0/24, "2001:db8:bad::/48"]')(yaml)),
    },
    from,
  );
}
