import type { TLSSocket } from 'node:tls';
import type { Attributes } from '@opentelemetry/api';
import { responseCompleted } from '../http/response-completed.js';
import { infoLineWriter, type Logger } from '../observability/log.js';
import type { ErrorCode } from '../errors/registry.js';
import type { Metrics } from '../observability/metrics.js';
import { DECISION_INDEX, DECISIONS } from '../observability/traffic.js';
import type { ServerOutcome } from '../tracing/server-trace.js';
import type { RequestContext } from './context.js';
import { UNMATCHED_ROUTE } from './route-label.js';

/**
 * Once the response is done (or the client went away): one log line and the request metrics. Who
 * (key id and plan, never the key), what (method and path without the query string, which may
 * carry secrets), and how it ended.
 */
export function observeWhenDone(ctx: RequestContext, logger: Logger, metrics: Metrics, route: (url: string | undefined) => string): void {
  const { req, res } = ctx;
  // Read now: an HTTP/2 request's socket is gone once its stream has closed. Only a TLS listener
  // writes them (http/tls-listener.ts): `"scheme":"https"`, and `"http":"2"` for an HTTP/2 stream.
  const tls = (req.socket as TLSSocket | undefined)?.encrypted
    ? req.httpVersionMajor === 2
      ? ',"scheme":"https","http":"2"'
      : ',"scheme":"https"'
    : '';
  // `on`, not `once`: a response emits 'close' once, and once's wrapper (made per request, and
  // removing itself on the way) was a measurable share of this listener's cost.
  res.on('close', () => {
    const ms = performance.now() - ctx.startedAtMs;
    const routeLabel = route(req.url);
    const aborted = !responseCompleted(res);
    metrics.requests.inc({ route: routeLabel, method: req.method ?? '', status: aborted ? 'aborted' : String(res.statusCode) });
    metrics.requestSeconds.observe({ route: routeLabel }, ms / 1000, ctx.trace?.sampledTraceId);
    const decision = decisionOf(ctx);
    // Anonymous callers (one consumer per address) count in the totals, never as the console's top keys they could crowd out.
    metrics.traffic.record(ctx.consumer?.anonymous ? undefined : ctx.consumer?.id, decision);
    ctx.trace?.end(serverOutcome(ctx, routeLabel, aborted, DECISIONS[decision]));
    if (!logger.isLevelEnabled('info')) return;
    // The fields pino would write for { reqId, traceId, method, path, scheme, http, status, ms, keyId, plan, degraded,
    // shadowRefusal, service, target, tries, aborted } (undefined ones left out), in that order, as one string (measured: issue 14).
    // traceId is the gateway's (tracing on), never a client's traceparent as sent: an invalid one was dropped.
    let fields = `${text('reqId', ctx.requestId)}${text('traceId', ctx.trace?.traceId)}${text('method', req.method)},"path":${JSON.stringify(req.url ? req.url.split('?', 1)[0] : '')}${tls}`;
    fields += `,"status":${res.statusCode},"ms":${Math.round(ms * 100) / 100}${text('keyId', ctx.consumer?.id)}${text('plan', ctx.consumer?.plan)}`;
    if (ctx.degraded) fields += ',"degraded":true';
    if (ctx.shadowRefusal) fields += `,"shadowRefusal":"${ctx.shadowRefusal}"`;
    if (ctx.upstream) fields += `${upstreamFields(ctx.upstream.service, ctx.upstream.target)},"tries":${ctx.upstream.tries}`;
    if (aborted) fields += ',"aborted":true';
    accessLineWriter(logger)(fields);
  });
}

/** Refusals that the console counts as `unauthenticated`: no key, a bad one, or an address over its failed-authentication limit. */
const UNAUTHENTICATED: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'missing_api_key',
  'malformed_api_key',
  'invalid_api_key',
  'revoked_api_key',
  'api_key_expired',
  'too_many_unauthenticated_requests',
]);

/** The console's decision for a request (traffic.ts): what the policy chain made of it. */
function decisionOf(ctx: RequestContext): number {
  const { refusal } = ctx;
  if (refusal === undefined) {
    if (ctx.consumer === undefined) return DECISION_INDEX.other;
    return ctx.shadowRefusal ? DECISION_INDEX.shadow_limited : DECISION_INDEX.admitted;
  }
  if (refusal === 'rate_limit_exceeded') return DECISION_INDEX.limited;
  if (refusal === 'api_key_banned') return DECISION_INDEX.banned;
  return UNAUTHENTICATED.has(refusal) ? DECISION_INDEX.unauthenticated : DECISION_INDEX.other;
}

/** The server span's route, status and tollgate.* attributes: ids, plan, decision and refusal code, never the key. */
function serverOutcome(ctx: RequestContext, routeLabel: string, aborted: boolean, decision?: string): ServerOutcome {
  const attributes: Attributes = {};
  if (decision) attributes['tollgate.decision'] = decision;
  if (ctx.consumer) {
    attributes['tollgate.key_id'] = ctx.consumer.id;
    attributes['tollgate.plan'] = ctx.consumer.plan;
  }
  if (ctx.refusal) attributes['tollgate.refusal'] = ctx.refusal;
  if (ctx.shadowRefusal) attributes['tollgate.shadow_refusal'] = ctx.shadowRefusal;
  if (ctx.degraded) attributes['tollgate.degraded'] = true;
  if (ctx.upstream) {
    attributes['tollgate.service'] = ctx.upstream.service;
    attributes['tollgate.tries'] = ctx.upstream.tries;
  }
  return { route: routeLabel === UNMATCHED_ROUTE ? undefined : routeLabel, status: aborted ? undefined : ctx.res.statusCode, attributes };
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

/**
 * `,"service":…,"target":…` for one target, escaped once and kept: the same few strings on every
 * line (the configured targets; emptied if reloads ever pile up thousands).
 */
const upstreamFieldsOf = new Map<string, Map<string, string>>();
function upstreamFields(service: string, target: string): string {
  let targets = upstreamFieldsOf.get(service);
  if (!targets) {
    if (upstreamFieldsOf.size >= 1000) upstreamFieldsOf.clear();
    upstreamFieldsOf.set(service, (targets = new Map()));
  }
  let fields = targets.get(target);
  if (fields === undefined) {
    if (targets.size >= 1000) targets.clear();
    targets.set(target, (fields = `${text('service', service)}${text('target', target)}`));
  }
  return fields;
}

/** `,"name":"value"` (JSON-escaped), or nothing for undefined, as pino leaves undefined fields out. */
const text = (name: string, value: string | undefined) => (value === undefined ? '' : `,"${name}":${JSON.stringify(value)}`);
