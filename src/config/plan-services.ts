import { ConfigError } from './config-error.js';
import { GATEWAY_FILE, PLANS_FILE } from './load.js';
import type { PlansConfig } from './plans-schema.js';
import { DEFAULT_SERVICE, type ServiceConfig } from './services-schema.js';

// The one rule that spans plans.yaml and gateway.yaml: every service a plan lists under
// `services:` is one gateway.yaml defines (or `default`, the service of upstream.url). Checked
// whichever file loads: plans.yaml naming an unknown service is refused as a plans.yaml mistake;
// gateway.yaml dropping a service a plan still names is refused as a gateway.yaml mistake (remove
// it from the plan first). Either way the previous config stays in force on a reload.

interface UnknownService {
  plan: string;
  index: number;
  service: string;
}

/** The first service some plan lists that `services` does not define. */
function firstUnknown(plans: PlansConfig, services: readonly ServiceConfig[]): UnknownService | undefined {
  const defined = new Set([DEFAULT_SERVICE, ...services.map((s) => s.name)]);
  for (const [plan, quota] of Object.entries(plans.plans)) {
    const index = quota.services?.findIndex((name) => !defined.has(name)) ?? -1;
    if (index >= 0) return { plan, index, service: quota.services![index]! };
  }
  return undefined;
}

/** plans.yaml as loaded, unless a plan names a service gateway.yaml does not define (a plans.yaml ConfigError). */
export function plansWithKnownServices(plans: PlansConfig, services: readonly ServiceConfig[]): PlansConfig {
  const unknown = firstUnknown(plans, services);
  if (unknown)
    throw new ConfigError(
      PLANS_FILE,
      `plans.${unknown.plan}.services.${unknown.index}`,
      `service "${unknown.service}" is not defined in ${GATEWAY_FILE} (its services, or "${DEFAULT_SERVICE}" for upstream.url)`,
    );
  return plans;
}

/** gateway.yaml's services as loaded, unless they leave out a service a plan names (a gateway.yaml ConfigError). */
export function servicesKeepingPlanned<S extends readonly ServiceConfig[]>(services: S, plans: PlansConfig): S {
  const unknown = firstUnknown(plans, services);
  if (unknown)
    throw new ConfigError(
      GATEWAY_FILE,
      'services',
      `service "${unknown.service}" is named by plan "${unknown.plan}" in ${PLANS_FILE}; remove it from the plan first`,
    );
  return services;
}
