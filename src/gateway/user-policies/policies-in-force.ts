import { ConfigError } from '../../config/config-error.js';
import type { PolicyEntry } from '../../config/policies-schema.js';
import { RULE_METHODS } from '../../config/routes-schema.js';
import { DEFAULT_SERVICE } from '../../config/services-schema.js';
import { checkOptions } from '../../plugins/check-options.js';
import type { AnyPolicy } from '../../plugins/load-policy-code.js';
import type { PolicyDefinition } from '../../plugins/policy-definition.js';
import { patternToRegExp } from '../route-rules.js';
import { RouteTable } from '../route-table.js';

/** One configured policy, its options checked and compiled: what the phase runners call. */
export interface BoundPolicy {
  readonly definition: AnyPolicy;
  readonly options: unknown;
  readonly budgetMs: number;
  /** The entry's `routes`; absent: every request of its scope. */
  readonly routes?: RouteTable<true>;
}

/** A service's policies (the global ones first), split by the phase each hooks. */
export interface PhaseLists {
  readonly access: readonly BoundPolicy[];
  readonly beforeForward: readonly BoundPolicy[];
  readonly responseHead: readonly BoundPolicy[];
  readonly afterAnswer: readonly BoundPolicy[];
  readonly any: boolean;
}

const NONE: PhaseLists = { access: [], beforeForward: [], responseHead: [], afterAnswer: [], any: false };

/** The policies in force for each service, as of one load of gateway.yaml (hot). */
export class PoliciesInForce {
  static readonly empty = new PoliciesInForce(new Map(), NONE);

  constructor(
    private readonly byService: ReadonlyMap<string, PhaseLists>,
    private readonly everywhere: PhaseLists,
  ) {}

  /** The lists for a service; a service without policies of its own gets the global ones. */
  of(service: string): PhaseLists {
    return this.byService.get(service) ?? this.everywhere;
  }
}

/** Where a list of entries sits in gateway.yaml, for error messages: `policies`, `services.2.policies`. */
export interface ScopedEntries {
  readonly field: string;
  readonly entries: readonly PolicyEntry[];
}

/**
 * Binds each entry to the code loaded at start and checks its options against the policy's schema.
 * A `use` not loaded at start (added by a reload) is refused: code loads at start only.
 * Every problem is a ConfigError naming gateway.yaml and the field.
 */
export function bindEntries(file: string, scoped: ScopedEntries, code: ReadonlyMap<string, AnyPolicy>): BoundPolicy[] {
  return scoped.entries.map((entry, i) => {
    const field = `${scoped.field}.${i}`;
    const definition = code.get(entry.use);
    if (!definition)
      throw new ConfigError(file, `${field}.use`, `"${entry.use}" was not loaded at start: policy code loads at start, restart to add it`);
    const checked = checkOptions(definition, entry.options);
    if (!checked.ok) throw new ConfigError(file, checked.path ? `${field}.options.${checked.path}` : `${field}.options`, checked.reason);
    const routes = entry.routes && routeTable(entry.routes);
    return routes
      ? { definition, options: checked.value, budgetMs: entry.budgetMs, routes }
      : { definition, options: checked.value, budgetMs: entry.budgetMs };
  });
}

/** The gateway's own policies (header rules, IP rules) need no budget: their hooks are synchronous. */
const BUILT_IN_BUDGET_MS = 1000;

/** One of the gateway's own policies, bound to options gateway.yaml's schema has checked already. */
export function bindBuiltIn<O, C>(definition: PolicyDefinition<O, C, string>, options: O): BoundPolicy {
  const compiled = definition.compile ? definition.compile(options) : options;
  return { definition: definition as AnyPolicy, options: compiled, budgetMs: BUILT_IN_BUDGET_MS };
}

/** The lists per service: the global policies, then the service's own, in the order written. */
export function policiesInForce(global: readonly BoundPolicy[], services: ReadonlyMap<string, readonly BoundPolicy[]>): PoliciesInForce {
  const byService = new Map<string, PhaseLists>();
  for (const [name, own] of services) if (own.length > 0) byService.set(name, phaseLists([...global, ...own]));
  const everywhere = global.length > 0 ? phaseLists(global) : NONE;
  if (!byService.has(DEFAULT_SERVICE)) byService.set(DEFAULT_SERVICE, everywhere);
  return new PoliciesInForce(byService, everywhere);
}

function phaseLists(bound: readonly BoundPolicy[]): PhaseLists {
  const hooking = (phase: keyof AnyPolicy) => bound.filter((b) => b.definition[phase] !== undefined);
  return {
    access: hooking('access'),
    beforeForward: hooking('beforeForward'),
    responseHead: hooking('responseHead'),
    afterAnswer: hooking('afterAnswer'),
    any: bound.length > 0,
  };
}

function routeTable(routes: NonNullable<PolicyEntry['routes']>): RouteTable<true> {
  return new RouteTable(
    routes.flatMap((route) =>
      (route.method ? [route.method] : RULE_METHODS).map((method) => ({
        method,
        pattern: patternToRegExp(route.path),
        value: true as const,
      })),
    ),
  );
}
