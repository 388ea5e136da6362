import { listAudit } from '../../keys/lifecycle/list-audit.js';
import type { AdminDeps, AdminRoute } from '../admin-route.js';

/** The audit of admin changes (API and CLI), newest first, cursor-paged. */
export function auditRoutes({ lifecycle }: AdminDeps): AdminRoute[] {
  return [
    {
      method: 'GET',
      path: '/audit',
      action: 'audit.read',
      handle: async (r) => ({ status: 200, body: await listAudit(lifecycle, r.query, r.caller.label) }),
    },
  ];
}
