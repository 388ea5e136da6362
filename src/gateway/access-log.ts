import type { Logger } from '../observability/log.js';
import type { Metrics } from '../observability/metrics.js';
import type { RequestContext } from './context.js';

/**
 * Once the response is done (or the client went away): one log line and the request metrics. Who
 * (key id and plan, never the key), what (method and path without the query string, which may
 * carry secrets), and how it ended.
 */
export function observeWhenDone(ctx: RequestContext, logger: Logger, metrics: Metrics, route: (url: string | undefined) => string): void {
  const { req, res } = ctx;
  res.once('close', () => {
    const ms = performance.now() - ctx.startedAtMs;
    const routeLabel = route(req.url);
    const aborted = !res.writableFinished;
    metrics.requests.inc({ route: routeLabel, method: req.method ?? '', status: aborted ? 'aborted' : String(res.statusCode) });
    metrics.requestSeconds.observe({ route: routeLabel }, ms / 1000);
    if (!logger.isLevelEnabled('info')) return;
    logger.info(
      {
        reqId: ctx.requestId,
        method: req.method,
        path: req.url ? req.url.split('?', 1)[0] : '',
        status: res.statusCode,
        ms: Math.round(ms * 100) / 100,
        keyId: ctx.consumer?.id,
        plan: ctx.consumer?.plan,
        degraded: ctx.degraded || undefined,
        shadowRefusal: ctx.shadowRefusal,
        aborted: aborted || undefined,
      },
      'request',
    );
  });
}
