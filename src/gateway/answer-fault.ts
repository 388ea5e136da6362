import type { IncomingMessage, ServerResponse } from 'node:http';
import { sendError } from '../errors/render.js';
import type { Logger } from '../observability/log.js';
import type { RequestContext } from './context.js';

/**
 * A fault of ours (a throw, a rejected promise) on one request: logged at error level, since it is
 * never the client's doing, and answered once (answerInternalError).
 */
export function answerFault(ctx: RequestContext, err: unknown, logger: Logger): void {
  logger.error({ err, reqId: ctx.requestId || undefined }, 'request failed: answered 500 internal_error');
  answerInternalError(ctx.req, ctx.res);
}

/**
 * Nothing sent yet: a 500 `internal_error` Error body, and on HTTP/1.1 the connection closed after
 * it (whatever threw may have left the request's body or the connection's state half-read). Fields
 * set for this request (request id, rate-limit fields, CORS) stay; `drop` names those that do not
 * describe it (an upstream's, copied before the fault). A response already under way cannot become
 * an error: it is cut, so the client sees a truncated response, never a corrupted one or a second
 * answer. Should writing the 500 itself throw, the connection goes.
 */
export function answerInternalError(req: IncomingMessage, res: ServerResponse, drop: readonly string[] = []): void {
  if (res.writableEnded) return;
  if (res.headersSent) {
    res.destroy();
    return;
  }
  try {
    for (const name of drop) res.removeHeader(name);
    if (req.httpVersionMajor === 1) res.shouldKeepAlive = false;
    sendError(res, 'internal_error');
  } catch {
    res.destroy();
  }
}
