import { infoLineWriter, type Logger } from '../observability/log.js';
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
    // The fields pino would write for { reqId, method, path, status, ms, keyId, plan, degraded,
    // shadowRefusal, service, target, tries, aborted } (undefined ones left out), in that order, as one string (measured: issue 14).
    let fields = `${text('reqId', ctx.requestId)}${text('method', req.method)},"path":${JSON.stringify(req.url ? req.url.split('?', 1)[0] : '')}`;
    fields += `,"status":${res.statusCode},"ms":${Math.round(ms * 100) / 100}${text('keyId', ctx.consumer?.id)}${text('plan', ctx.consumer?.plan)}`;
    if (ctx.degraded) fields += ',"degraded":true';
    if (ctx.shadowRefusal) fields += `,"shadowRefusal":"${ctx.shadowRefusal}"`;
    if (ctx.upstream)
      fields += `${text('service', ctx.upstream.service)}${text('target', ctx.upstream.target)},"tries":${ctx.upstream.tries}`;
    if (aborted) fields += ',"aborted":true';
    accessLineWriter(logger)(fields);
  });
}

const writers = new WeakMap<Logger, (fields: string) => void>();

function accessLineWriter(logger: Logger): (fields: string) => void {
  let write = writers.get(logger);
  if (!write) {
    write = infoLineWriter(logger, 'request');
    writers.set(logger, write);
  }
  return write;
}

/** `,"name":"value"` (JSON-escaped), or nothing for undefined, as pino leaves undefined fields out. */
const text = (name: string, value: string | undefined) => (value === undefined ? '' : `,"${name}":${JSON.stringify(value)}`);
