import type { AccessRule } from '../config/routes-schema.js';
import type { ServiceConfig } from '../config/services-schema.js';
import type { RequireScopes } from '../policies/access/access-schema.js';
import { patternToRegExp } from './route-rules.js';
import { RouteTable } from './route-table.js';

/** What a request's method, path and service ask of its caller. */
export interface Access {
  /** Scopes the credential must hold, every one (empty: none). */
  scopes: readonly string[];
  /** A request with no credential is admitted as the anonymous consumer on this plan; undefined: it is not. */
  anonymousPlan?: string;
}

export const OPEN: Access = Object.freeze({ scopes: Object.freeze([]) });

/**
 * The services' `requireScopes` and `anonymous` and gateway.yaml `routes.access`, compiled once
 * per load (route-table.ts: first matching rule, GET covers HEAD). A route's scopes add to its
 * service's, so a route rule never weakens what the service requires; its anonymous plan, when it
 * has one, replaces the service's.
 */
export class RouteAccess {
  private readonly routes: RouteTable<AccessRule>;
  private readonly rules: number;
  private readonly services = new Map<string, Pick<ServiceConfig, 'requireScopes' | 'anonymous'>>();

  constructor(rules: readonly AccessRule[], services: readonly ServiceConfig[]) {
    this.rules = rules.length;
    this.routes = new RouteTable(rules.map((rule) => ({ method: rule.method, pattern: patternToRegExp(rule.path), value: rule })));
    for (const s of services) if (s.requireScopes || s.anonymous) this.services.set(s.name, s);
  }

  /** No rule and no service asks anything: every request is OPEN (the common case, decided without reading the path). */
  get none(): boolean {
    return this.rules === 0 && this.services.size === 0;
  }

  /** What `method` on `path` (no query string) of service `serviceName` asks of its caller. */
  of(method: string, path: string, serviceName: string): Access {
    const route = this.routes.match(method, path);
    const service = this.services.get(serviceName);
    if (!route && !service) return OPEN;
    const serviceScopes = service?.requireScopes ? scopesFor(service.requireScopes, method) : [];
    const scopes = route?.requireScopes ? [...new Set([...serviceScopes, ...route.requireScopes])] : serviceScopes;
    const anonymousPlan =
      route?.anonymous?.plan ??
      (service?.anonymous?.methods.some((m) => m === method || (m === 'GET' && method === 'HEAD')) ? service.anonymous.plan : undefined);
    return { scopes, anonymousPlan };
  }
}

/** A method's own entry; HEAD without one takes GET's; else `"*"`; else none. */
function scopesFor(required: RequireScopes, method: string): readonly string[] {
  const own = required[method as keyof RequireScopes] ?? (method === 'HEAD' ? required.GET : undefined);
  return own ?? required['*'] ?? [];
}
