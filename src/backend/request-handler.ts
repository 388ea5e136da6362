import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { ErrorCode } from '../errors/registry.js';
import { sendError } from '../errors/render.js';
import type { BackendDeps } from './backend-deps.js';
import { discardRestOfBody } from '../http/discard-rest-of-body.js';
import { errorReply, writeReply, type Reply } from './reply.js';
import { matchRoute, routeTemplate } from './routes.js';

/** Answered 200 to GET and HEAD without an assertion (README, "Services": `healthCheck`). */
export const HEALTH_PATH = '/healthz';

/** Decides whether a request may be served; an error code refuses it (e.g. no gateway assertion). */
export type VerifyRequest = (req: IncomingMessage) => Promise<ErrorCode | null>;

/**
 * The request lifecycle, in order: verify → route → handle → write. Handlers return their answer
 * as data; anything they throw is a fault, caught here once, logged, and answered with 500 so a
 * bad request can never take the process down.
 */
export function createRequestHandler(deps: BackendDeps, verifyRequest?: VerifyRequest) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    const startedAt = performance.now();
    const method = req.method ?? 'GET';
    // Query strings play no part in routing; they are also left out of logs (they may hold secrets).
    const path = (req.url ?? '/').split('?', 1)[0]!;
    // Its parent is the gateway's try span (the traceparent the gateway sent).
    const trace = deps.tracing?.serverRequest(req, 'http');
    res.once('close', () => {
      trace?.end({ route: routeTemplate(path), status: res.writableFinished ? res.statusCode : undefined });
      // Method, path, status and time only: headers (Authorization above all) are never logged.
      // A client that left before any answer has no status (null) and completed: false.
      const ms = Math.round((performance.now() - startedAt) * 10) / 10;
      const status = res.headersSent ? res.statusCode : null;
      deps.logger.info({ method, path, status, ms, completed: res.writableFinished }, 'request');
    });
    const fault = (err: unknown) => deps.logger.error({ err, method, path }, 'request failed');
    answer(req, method, path, deps, verifyRequest)
      .catch((err: unknown) => {
        fault(err);
        return errorReply('internal_error');
      })
      .then((reply) => {
        try {
          writeReply(res, reply);
        } catch (err) {
          fault(err);
          sendError(res, 'internal_error');
        }
        // Answered without reading the whole body (refused, too large, unknown path): drop the
        // rest, bounded. Started in the same tick as the write, before the response's 'finish',
        // so it takes the place of Node's own unbounded drain.
        discardRestOfBody(req);
      })
      .catch(fault);
  };
}

async function answer(
  req: IncomingMessage,
  method: string,
  path: string,
  deps: BackendDeps,
  verifyRequest: VerifyRequest | undefined,
): Promise<Reply> {
  // Liveness, before any assertion: what a gateway's health probe (a service's `healthCheck`) and
  // a container check ask, neither of which carries the gateway's assertion. It says nothing else.
  if (path === HEALTH_PATH && (method === 'GET' || method === 'HEAD')) return { status: 200, body: { status: 'ok' } };
  const refusal = verifyRequest ? await verifyRequest(req) : null;
  if (refusal) return errorReply(refusal);
  const match = matchRoute(method, path);
  return 'reply' in match ? match.reply : match.handler(req, match.params, deps);
}
