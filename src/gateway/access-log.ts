import type { Logger } from '../observability/log.js';
import type { RequestContext } from './context.js';

/**
 * One line per request once the response is done (or the client went away): who (key id and
 * plan, never the key), what (method and path without the query string, which may carry secrets),
 * and how it ended.
 */
export function logWhenDone(ctx: RequestContext, logger: Logger): void {
  const { req, res } = ctx;
  res.once('close', () => {
    const path = req.url ? req.url.split('?', 1)[0] : '';
    logger.info(
      {
        reqId: ctx.requestId,
        method: req.method,
        path,
        status: res.statusCode,
        ms: Math.round((performance.now() - ctx.startedAtMs) * 100) / 100,
        keyId: ctx.consumer?.id,
        plan: ctx.consumer?.plan,
        degraded: ctx.degraded || undefined,
        aborted: res.writableFinished ? undefined : true,
      },
      'request',
    );
  });
}
