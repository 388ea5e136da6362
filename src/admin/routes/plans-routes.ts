import type { AdminDeps, AdminRoute } from '../admin-route.js';

/** The plans in force on this replica (each replica reloads plans.yaml on its own) and when they were loaded. */
export function plansRoutes({ plans }: AdminDeps): AdminRoute[] {
  return [
    {
      method: 'GET',
      path: '/plans',
      action: 'plans.read',
      handle: async () => {
        const { config, loadedAt } = plans();
        return { status: 200, body: { loadedAt, plans: config.plans, ban: config.ban } };
      },
    },
  ];
}
