import { createServer, type Server } from 'node:http';
import { sendError, sendJson } from '../errors/render.js';
import type { AdminApi } from './admin-api.js';

export interface AdminChecks {
  /** Each named dependency's readiness; any false makes /readyz answer 503. */
  readiness(): Promise<Record<string, boolean>>;
  /**
   * Each upstream service's targets in rotation, shown on /readyz but never part of its status:
   * one dead backend must not take every gateway replica out of its load balancer.
   */
  services?(): unknown;
  /** True once a shutdown began (http/drain.ts): /readyz answers 503 whatever the checks say. */
  draining?(): boolean;
  /** The metrics page; `accept` is the scraper's Accept (OpenMetrics, with exemplars, when it asks: observability/scrape.ts). */
  metrics?(accept?: string): Promise<{ contentType: string; body: string }>;
}

/**
 * The operations listener, on its own port and bound to 127.0.0.1 by default: health and metrics
 * without auth, so it must not be reachable from clients; the admin API under /admin when admin
 * tokens are configured (404 otherwise).
 */
export function createAdminServer(checks: AdminChecks, adminApi?: AdminApi): Server {
  return createServer((req, res) => {
    void (async () => {
      const path = (req.url ?? '/').split('?', 1)[0]!;
      if (path === '/admin' || path.startsWith('/admin/')) return adminApi ? adminApi.handle(req, res, path) : sendError(res, 'not_found');
      if (req.method !== 'GET' && req.method !== 'HEAD') return sendError(res, 'method_not_allowed');
      if (path === '/healthz') return sendJson(res, 200, { status: 'ok' });
      if (path === '/readyz') {
        const checksResult = await checks.readiness();
        const draining = checks.draining?.() ?? false;
        const ready = !draining && Object.values(checksResult).every(Boolean);
        return sendJson(res, ready ? 200 : 503, {
          status: draining ? 'draining' : ready ? 'ready' : 'not ready',
          checks: checksResult,
          services: checks.services?.(),
        });
      }
      if (path === '/metrics' && checks.metrics) {
        const { contentType, body } = await checks.metrics(req.headers.accept);
        res.setHeader('content-type', contentType);
        return res.end(body);
      }
      sendError(res, 'not_found');
    })().catch(() => sendError(res, 'internal_error'));
  });
}
