import { ConfigError } from '../../config/config-error.js';
import type { GatewayFile } from '../../config/gateway-schema.js';
import { GATEWAY_FILE } from '../../config/load.js';
import type { ServiceConfig } from '../../config/services-schema.js';
import { loadPolicyCode, type AnyPolicy } from '../../plugins/load-policy-code.js';
import { bindEntries, policiesInForce, type BoundPolicy, type PoliciesInForce, type ScopedEntries } from './policies-in-force.js';

/** Every `policies:` list of gateway.yaml with where it sits: the top level, then each service's. */
export function scopedEntries(file: GatewayFile, services: readonly ServiceConfig[] = file.services): ScopedEntries[] {
  return [
    { field: 'policies', entries: file.policies },
    ...services.map((service, i) => ({ field: `services.${i}.policies`, entries: service.policies })),
  ];
}

/**
 * Imports the code of every policy gateway.yaml names, once per `use`, at start (and for
 * check-config): a reload binds new options to this code, never loads more.
 */
export async function loadPolicies(file: GatewayFile, configDir: string): Promise<Map<string, AnyPolicy>> {
  const code = new Map<string, AnyPolicy>();
  const names = new Map<string, string>();
  for (const scope of scopedEntries(file))
    for (const [i, entry] of scope.entries.entries()) {
      if (code.has(entry.use)) continue;
      const field = `${scope.field}.${i}.use`;
      const definition = await loadPolicyCode(entry.use, configDir).catch((err: Error) => {
        throw new ConfigError(GATEWAY_FILE, field, err.message);
      });
      // The name is the KV namespace and the metrics label: two pieces of code may not share one.
      const other = names.get(definition.name);
      if (other !== undefined && other !== entry.use)
        throw new ConfigError(GATEWAY_FILE, field, `"${entry.use}" is named "${definition.name}" like "${other}"`);
      names.set(definition.name, entry.use);
      code.set(entry.use, definition);
    }
  return code;
}

/** gateway.yaml's policies bound to the loaded code: the lists each service runs (hot, with the file). */
export function compilePolicies(
  file: GatewayFile,
  services: readonly ServiceConfig[],
  code: ReadonlyMap<string, AnyPolicy>,
): PoliciesInForce {
  const [global, ...own] = scopedEntries(file, services).map((scope) => bindEntries(GATEWAY_FILE, scope, code));
  return policiesInForce(global!, new Map(services.map((service, i): [string, BoundPolicy[]] => [service.name, own[i]!])));
}
