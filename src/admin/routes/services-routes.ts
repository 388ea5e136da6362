import type { AdminDeps, AdminRoute } from '../admin-route.js';

/**
 * The upstream services in force on this replica (each replica reloads gateway.yaml and keeps its
 * own health view): each service's targets with their load, standing and ejections. The default
 * service (upstream.url) comes first.
 */
export function servicesRoutes({ services, ipRules }: AdminDeps): AdminRoute[] {
  return [
    {
      method: 'GET',
      path: '/services',
      handle: async () => ({ status: 200, body: { services: services(), ipRules: ipRules?.() ?? null } }),
    },
  ];
}
