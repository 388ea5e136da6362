import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { sendError, sendJson } from '../errors/render.js';
import { answerInternalError } from '../gateway/answer-fault.js';
import { answerClientErrors } from '../http/client-errors.js';
import type { TestFaults } from '../gateway/test-faults.js';
import type { Logger } from '../observability/log.js';
import type { AdminApi } from './admin-api.js';

export interface AdminChecks {
  /** Each named dependency's readiness; any false makes /readyz answer 503, unless `degradable` names it. */
  readiness(): Promise<Record<string, boolean>>;
  /**
   * Checks whose failure leaves this replica able to serve as configured (Redis under the `local`
   * or `open` failure mode): /readyz stays 200 and says `degraded`, naming them.
   */
  degradable?: readonly string[];
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
export function createAdminServer(checks: AdminChecks, adminApi: AdminApi | undefined, logger: Logger, faults?: TestFaults): Server {
  async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // As on the public listener: llhttp accepts `HTTP/2.0` and `HTTP/0.9` request lines.
    if (req.httpVersionMajor !== 1) {
      res.shouldKeepAlive = false;
      return sendError(res, 'http_version_not_supported');
    }
    const path = (req.url ?? '/').split('?', 1)[0]!;
    if (path === '/admin' || path.startsWith('/admin/')) return adminApi ? adminApi.handle(req, res, path) : sendError(res, 'not_found');
    if (req.method !== 'GET' && req.method !== 'HEAD') return sendError(res, 'method_not_allowed');
    if (path === '/healthz') return sendJson(res, 200, { status: 'ok' });
    if (path === '/readyz') {
      const checksResult = await checks.readiness();
      const draining = checks.draining?.() ?? false;
      const failing = Object.keys(checksResult).filter((name) => !checksResult[name]);
      const degraded = failing.filter((name) => checks.degradable?.includes(name));
      const ready = !draining && degraded.length === failing.length;
      const status = draining ? 'draining' : !ready ? 'not ready' : degraded.length > 0 ? 'degraded' : 'ready';
      return sendJson(res, ready ? 200 : 503, {
        status,
        checks: checksResult,
        ...(degraded.length > 0 ? { degraded } : {}),
        services: checks.services?.(),
      });
    }
    if (path === '/metrics' && checks.metrics) {
      const { contentType, body } = await checks.metrics(req.headers.accept);
      res.setHeader('content-type', contentType);
      res.end(body);
      return;
    }
    sendError(res, 'not_found');
  }
  // Test-only (test-faults.ts, stage `admin`); absent in production: the handler as it is.
  const handle = faults ? faults.wrap('admin', serve, (req) => req) : serve;
  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    void (async () => handle(req, res))().catch((err: unknown) => {
      // A fault of ours (a readiness check, the metrics page, the admin API or the console): said
      // at error level, and answered once: a 500, or a cut response if one had started (never a
      // second answer, nor a response left open).
      logger.error({ err, path: (req.url ?? '/').split('?', 1)[0] }, 'admin request failed: answered 500 internal_error');
      answerInternalError(req, res);
    });
  };
  const server = createServer(onRequest);
  // Without this listener Node answers `Expect: 100-continue` with 100 before any route ran, so a
  // probe, a 404 or a refused token would first invite a body nobody reads; with it, 100 is sent
  // only by the routes that read one (continue-body.ts).
  server.on('checkContinue', onRequest);
  // Malformed requests: an Error body and a close, as on the public listener, not Node's empty 400.
  answerClientErrors(server);
  return server;
}
