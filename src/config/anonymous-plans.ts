import { ConfigError } from './config-error.js';
import { GATEWAY_FILE, PLANS_FILE } from './load.js';
import type { PlansConfig } from './plans-schema.js';
import type { AccessRule } from './routes-schema.js';
import type { ServiceConfig } from './services-schema.js';

// The plans gateway.yaml gives anonymous callers (services[].anonymous.plan, routes.access[].anonymous.plan)
// must be plans.yaml's, like the services plans name (plan-services.ts): a gateway.yaml naming an
// unknown plan is a gateway.yaml mistake (at start, on its reload, in check-config); a plans.yaml
// reload dropping one still named is a plans.yaml mistake. Either way the previous config stays in
// force on a reload.

/** The first anonymous plan gateway.yaml names that `plans` lacks, with the field naming it. */
function firstUnknown(
  plans: PlansConfig,
  services: readonly ServiceConfig[],
  access: readonly AccessRule[],
): { field: string; plan: string } | undefined {
  const uses = [
    ...services.map((s, i) => ({ field: `services.${i}.anonymous.plan`, plan: s.anonymous?.plan })),
    ...access.map((r, i) => ({ field: `routes.access.${i}.anonymous.plan`, plan: r.anonymous?.plan })),
  ];
  for (const { field, plan } of uses) if (plan !== undefined && !Object.hasOwn(plans.plans, plan)) return { field, plan };
  return undefined;
}

/** Throws a gateway.yaml ConfigError when an anonymous plan it names is not in plans.yaml. */
export function anonymousPlansDefined(plans: PlansConfig, services: readonly ServiceConfig[], access: readonly AccessRule[]): void {
  const unknown = firstUnknown(plans, services, access);
  if (unknown) throw new ConfigError(GATEWAY_FILE, unknown.field, `plan "${unknown.plan}" is not defined in ${PLANS_FILE}`);
}

/** plans.yaml as loaded, unless it lacks a plan gateway.yaml gives anonymous callers (a plans.yaml ConfigError). */
export function plansKeepingAnonymous(plans: PlansConfig, services: readonly ServiceConfig[], access: readonly AccessRule[]): PlansConfig {
  const unknown = firstUnknown(plans, services, access);
  if (unknown)
    throw new ConfigError(
      PLANS_FILE,
      'plans',
      `plan "${unknown.plan}" is not defined, but ${GATEWAY_FILE} ${unknown.field} gives it to anonymous callers`,
    );
  return plans;
}
