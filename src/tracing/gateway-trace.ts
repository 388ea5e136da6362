import { SpanKind, SpanStatusCode, type Attributes, type Span } from '@opentelemetry/api';
import {
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_REQUEST_RESEND_COUNT,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
} from '@opentelemetry/semantic-conventions';
import { ServerTrace } from './server-trace.js';
import { traceparentOf } from './trace-context.js';

/**
 * The gateway's server span and its children: the key lookup when it reaches the store, the quota
 * decision, and one CLIENT span per upstream try, whose context the target receives as its
 * parent. Attributes carry ids, plans, services and outcomes: never a key, an assertion or a
 * header value.
 */
export class GatewayTrace extends ServerTrace {
  private currentTry?: Span;
  /** The request's fields without the client's trace context (replaced on every try). */
  private baseFields?: string[];

  /** A child span for a policy's store call (`tollgate key lookup`, `tollgate quota decision`). */
  storeCall(name: string, keyId: string): Span | undefined {
    return this.child(name, SpanKind.INTERNAL, { 'tollgate.key_id': keyId });
  }

  /**
   * Ends a store call's span with what it found; `errorType` marks a failed call. A method, not a
   * function the policies import: a gateway that traces nothing then never loads this module, nor
   * OpenTelemetry's API and semantic conventions with it.
   */
  endStoreCall(span: Span | undefined, attributes: Attributes, errorType?: string): void {
    if (!span) return;
    span.setAttributes(attributes);
    if (errorType !== undefined) {
      span.setAttribute(ATTR_ERROR_TYPE, errorType);
      span.setStatus({ code: SpanStatusCode.ERROR });
    }
    span.end();
  }

  /**
   * Starts an upstream try's CLIENT span and returns the request's field list (name, value, …)
   * with `traceparent` (and the client's valid `tracestate`) naming it as the parent. An
   * unsampled request passes its own server span on, flagged unsampled, and records nothing.
   */
  startTry(fields: string[], method: string, service: string, target: string, retry: number): string[] {
    this.baseFields ??= withoutTraceContext(fields);
    const span = this.child(method, SpanKind.CLIENT, {
      [ATTR_HTTP_REQUEST_METHOD]: method,
      ...addressOf(target),
      'tollgate.service': service,
      'tollgate.retry': retry,
    });
    if (span && retry > 0) span.setAttribute(ATTR_HTTP_REQUEST_RESEND_COUNT, retry);
    this.currentTry = span;
    const context = (span ?? this.span).spanContext();
    const out = [...this.baseFields, 'traceparent', traceparentOf(context)];
    const state = context.traceState?.serialize();
    if (state) out.push('tracestate', state);
    return out;
  }

  /** The status of the current try's response head. */
  tryStatus(status: number): void {
    this.currentTry?.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status);
  }

  /** Ends the current try: `ok`, `status_5xx`, a failure kind (retry-policy.ts), `error` or `abandoned`. */
  endTry(outcome: string): void {
    const span = this.currentTry;
    if (!span) return;
    this.currentTry = undefined;
    span.setAttribute('tollgate.outcome', outcome);
    if (outcome !== 'ok') {
      span.setAttribute(ATTR_ERROR_TYPE, outcome);
      span.setStatus({ code: SpanStatusCode.ERROR });
    }
    span.end();
  }
}

/** Storage for the try's target address, parsed once per target URL (a bounded set: the configured targets). */
const addresses = new Map<string, { [ATTR_SERVER_ADDRESS]: string; [ATTR_SERVER_PORT]: number }>();

function addressOf(target: string) {
  let address = addresses.get(target);
  if (!address) {
    const url = new URL(target);
    const port = url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : 80;
    address = { [ATTR_SERVER_ADDRESS]: url.hostname.replace(/^\[|\]$/g, ''), [ATTR_SERVER_PORT]: port };
    if (addresses.size >= 1000) addresses.clear();
    addresses.set(target, address);
  }
  return address;
}

function withoutTraceContext(fields: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i]!;
    if (name === 'traceparent' || name === 'tracestate') continue;
    out.push(name, fields[i + 1]!);
  }
  return out;
}
