import { LifecycleError } from '../../keys/lifecycle/lifecycle-error.js';
import type { AdminDeps, AdminRoute } from '../admin-route.js';

/**
 * The upstream services in force on this replica (each replica reloads gateway.yaml and keeps its
 * own health view): each service's targets with their load, standing and ejections. And the purge
 * of a service's response cache, which reaches every replica.
 */
export function servicesRoutes({ services, purgeCache, ipRules, limits }: AdminDeps): AdminRoute[] {
  return [
    {
      method: 'GET',
      path: '/services',
      action: 'services.read',
      handle: async () => ({ status: 200, body: { services: services(), ipRules: ipRules?.() ?? null, limits: limits?.() ?? [] } }),
    },
    {
      method: 'DELETE',
      path: '/services/{name}/cache',
      action: 'cache.purge',
      handle: async (r) => {
        for (const name of Object.keys(r.query))
          if (name !== 'prefix') throw new LifecycleError('invalid_query', `unknown query parameter ${name}`);
        const prefix = r.query.prefix;
        if (prefix !== undefined && !prefix.startsWith('/'))
          throw new LifecycleError('invalid_query', 'prefix must be a path starting with /');
        const purged = purgeCache ? await purgeCache(r.params.name!, prefix) : undefined;
        if (purged === undefined) throw new LifecycleError('not_found', `no service is named ${r.params.name}`);
        return { status: 200, body: { service: r.params.name, prefix: prefix ?? null, purged } };
      },
    },
  ];
}
