import type { IncomingMessage } from 'node:http';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type Tracer } from '@opentelemetry/api';
import {
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_REQUEST_METHOD_ORIGINAL,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_NETWORK_PROTOCOL_VERSION,
  ATTR_URL_SCHEME,
  ATTR_ERROR_TYPE,
} from '@opentelemetry/semantic-conventions';
import { parentFromHeaders, traceparentOf } from './trace-context.js';

// OpenTelemetry HTTP semantic conventions (stable): methods outside the known set are `_OTHER`,
// with the method as sent in http.request.method_original, so span names stay a bounded set.
const KNOWN_METHODS = new Set(['CONNECT', 'DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT', 'TRACE']);

/** How a server request ended: the route template (undefined: matched none), the status, the span's own extras. */
export interface ServerOutcome {
  route?: string;
  /** Undefined when the client left before the response was complete. */
  status?: number;
  attributes?: Attributes;
}

/**
 * The SERVER span of one request: the client's valid `traceparent`/`tracestate` continued, an
 * invalid or missing one replaced by a new trace (trace-context.ts). Named `METHOD` until the end
 * tells the route template (`GET /v1/pets/{petId}`); never the path as sent.
 */
export class ServerTrace {
  readonly span: Span;
  private readonly method: string;
  private childParent?: Context;

  constructor(
    protected readonly tracer: Tracer,
    req: IncomingMessage,
    scheme: 'http' | 'https',
  ) {
    const sent = req.method ?? 'GET';
    this.method = KNOWN_METHODS.has(sent) ? sent : '_OTHER';
    const attributes: Attributes = {
      [ATTR_HTTP_REQUEST_METHOD]: this.method,
      [ATTR_URL_SCHEME]: scheme,
      [ATTR_NETWORK_PROTOCOL_VERSION]: req.httpVersionMajor === 2 ? '2' : `1.${req.httpVersionMinor}`,
    };
    if (this.method === '_OTHER') attributes[ATTR_HTTP_REQUEST_METHOD_ORIGINAL] = sent.slice(0, 32);
    const parent = parentFromHeaders(req.headers.traceparent, req.headers.tracestate);
    const context = parent ? trace.setSpanContext(ROOT_CONTEXT, parent) : ROOT_CONTEXT;
    this.span = tracer.startSpan(this.method === '_OTHER' ? 'HTTP' : this.method, { kind: SpanKind.SERVER, attributes }, context);
  }

  get traceId(): string {
    return this.span.spanContext().traceId;
  }

  /** The trace id when this request is sampled (exported): what an exemplar may point at. */
  get sampledTraceId(): string | undefined {
    return this.span.isRecording() ? this.span.spanContext().traceId : undefined;
  }

  /** W3C Trace Context Level 2 `traceresponse`: this request's trace and server span. */
  traceresponse(): string {
    return traceparentOf(this.span.spanContext());
  }

  /** A child span, or undefined when this request is not sampled (nothing would record it). */
  child(name: string, kind: SpanKind, attributes: Attributes): Span | undefined {
    if (!this.span.isRecording()) return undefined;
    this.childParent ??= trace.setSpan(ROOT_CONTEXT, this.span);
    return this.tracer.startSpan(name, { kind, attributes }, this.childParent);
  }

  end(outcome: ServerOutcome): void {
    const { span } = this;
    if (!span.isRecording()) return span.end();
    if (outcome.route !== undefined) {
      span.updateName(`${this.method === '_OTHER' ? 'HTTP' : this.method} ${outcome.route}`);
      span.setAttribute(ATTR_HTTP_ROUTE, outcome.route);
    }
    if (outcome.status !== undefined) span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, outcome.status);
    if (outcome.attributes) span.setAttributes(outcome.attributes);
    // Server spans: 5xx is an error, 4xx the client's (semantic conventions, HTTP spans: status).
    if (outcome.status === undefined || outcome.status >= 500) {
      span.setAttribute(ATTR_ERROR_TYPE, outcome.status === undefined ? 'aborted' : String(outcome.status));
      span.setStatus({ code: SpanStatusCode.ERROR });
    }
    span.end();
  }
}
