import { ConfigError } from '../../config/config-error.js';
import type { GatewayFile } from '../../config/gateway-schema.js';
import { GATEWAY_FILE } from '../../config/load.js';
import type { ServiceConfig } from '../../config/services-schema.js';
import { loadPolicyCode, type AnyPolicy } from '../../plugins/load-policy-code.js';
import { globalIpRulesPolicy, serviceIpRulesPolicy } from '../../policies/ip-rules/ip-rules-policy.js';
import { headerRulesPolicy } from '../../policies/header-rules/header-rules-policy.js';
import {
  bindBuiltIn,
  bindEntries,
  policiesInForce,
  type BoundPolicy,
  type PoliciesInForce,
  type ScopedEntries,
} from './policies-in-force.js';

const BUILT_IN_NAMES = new Set([headerRulesPolicy.name, globalIpRulesPolicy.name, serviceIpRulesPolicy.name]);

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
      if (BUILT_IN_NAMES.has(definition.name))
        throw new ConfigError(GATEWAY_FILE, field, `"${entry.use}" is named "${definition.name}", the name of a built-in policy`);
      const other = names.get(definition.name);
      if (other !== undefined && other !== entry.use)
        throw new ConfigError(GATEWAY_FILE, field, `"${entry.use}" is named "${definition.name}" like "${other}"`);
      names.set(definition.name, entry.use);
      code.set(entry.use, definition);
    }
  return code;
}

/**
 * gateway.yaml's policies bound to the loaded code: the lists each service runs (hot, with the
 * file). A service's header rules come first among its own (they were last in the chain before).
 */
export function compilePolicies(
  file: GatewayFile,
  services: readonly ServiceConfig[],
  code: ReadonlyMap<string, AnyPolicy>,
): PoliciesInForce {
  const [global, ...own] = scopedEntries(file, services).map((scope) => bindEntries(GATEWAY_FILE, scope, code));
  return policiesInForce(
    global!,
    new Map(services.map((service, i): [string, BoundPolicy[]] => [service.name, [...builtIns(service), ...own[i]!]])),
  );
}

/** The gateway's own policies a service's config asks for, on the same interface. */
function builtIns(service: ServiceConfig): BoundPolicy[] {
  const { requestHeaders: request, responseHeaders: response } = service;
  return request || response ? [bindBuiltIn(headerRulesPolicy, { request, response })] : [];
}
