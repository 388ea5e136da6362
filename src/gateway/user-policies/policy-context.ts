import type { ProxyTrust } from '../../http/proxy-trust.js';
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { clientAddressOf } from '../../http/client-address.js';
import { responseCompleted } from '../../http/response-completed.js';
import { ASSERTION_HEADER } from '../../identity/assertion.js';
import type { Logger } from '../../observability/log.js';
import { ownedFieldReason } from '../../policies/header-rules/owned-fields.js';
import type {
  AnswerContext,
  ForwardContext,
  PolicyConsumer,
  PolicyHeaders,
  PolicyKv,
  PolicyLogger,
  PolicyMetrics,
  PolicyRequest,
  ResponseHeadContext,
} from '../../plugins/policy-context.js';
import { DEFAULT_SERVICE } from '../../config/services-schema.js';
import type { RequestContext } from '../context.js';

/**
 * Fields a policy never sees: the client's credentials (a bearer key, a JWT, a WebSocket ticket
 * in Sec-WebSocket-Protocol), its cookies, and the signed assertion the gateway sends upstream.
 */
const HIDDEN = new Set(['authorization', 'proxy-authorization', 'cookie', 'sec-websocket-protocol', ASSERTION_HEADER]);

/** What a policy's context needs of its policy: named once per policy, shared by its requests. */
export interface PolicyTools {
  readonly name: string;
  readonly logger: Logger;
  readonly metrics: PolicyMetrics;
  readonly kv: PolicyKv;
}

/** The request's side of every policy context, made once per request (lazily) and shared by its policies. */
export class PolicyRequestView {
  private headersSeen?: PolicyHeaders;
  private requestSeen?: PolicyRequest;
  private consumerSeen?: PolicyConsumer;
  private addressSeen?: string;
  /** Set by the response phases. */
  response?: ServerResponse;
  /** The response has closed (the afterAnswer phase). */
  closed = false;
  /** Response fields the responseHead hooks set (the proxy drops them should the relay fail). */
  readonly responseFieldsSet: string[] = [];

  constructor(
    readonly ctx: RequestContext,
    private readonly proxyTrust: ProxyTrust,
  ) {}

  get request(): PolicyRequest {
    if (!this.requestSeen) {
      const url = this.ctx.req.url ?? '/';
      const q = url.indexOf('?');
      const headersNow = () => this.headers();
      this.requestSeen = Object.freeze({
        method: this.ctx.req.method ?? 'GET',
        path: q < 0 ? url : url.slice(0, q),
        query: q < 0 ? '' : url.slice(q + 1),
        get headers() {
          return headersNow();
        },
      });
    }
    return this.requestSeen;
  }

  get consumer(): PolicyConsumer | undefined {
    const consumer = this.ctx.consumer;
    if (!consumer) return undefined;
    if (this.consumerSeen?.id !== consumer.id)
      this.consumerSeen = {
        id: consumer.id,
        plan: consumer.plan,
        ...(consumer.owner && { owner: consumer.owner }),
        scopes: Object.freeze([...(consumer.scopes ?? [])]),
        anonymous: consumer.anonymous === true,
      };
    return this.consumerSeen;
  }

  get clientAddress(): string {
    return (this.addressSeen ??= clientAddressOf(this.ctx.req, this.proxyTrust));
  }

  get service(): string {
    return this.ctx.route?.service.name ?? DEFAULT_SERVICE;
  }

  /** The gateway changed request fields since (upstream-identity.ts): the next read copies them again. */
  fieldsChanged(): void {
    this.headersSeen = undefined;
  }

  /** A frozen copy without the hidden fields, made again after a policy changed a field. */
  headers(): PolicyHeaders {
    if (!this.headersSeen) {
      const copy: Record<string, string | readonly string[]> = {};
      const all: IncomingHttpHeaders = this.ctx.req.headers;
      for (const name in all) {
        const value = all[name];
        if (value !== undefined && !HIDDEN.has(name)) copy[name] = Array.isArray(value) ? Object.freeze([...value]) : value;
      }
      this.headersSeen = Object.freeze(copy);
    }
    return this.headersSeen;
  }

  setRequestHeader(name: string, value: string): void {
    const lower = checkedField(name, value);
    this.ctx.req.headers[lower] = value;
    this.headersSeen = undefined;
  }

  removeRequestHeader(name: string): void {
    const lower = checkedField(name);
    // Assigned undefined rather than deleted: the proxy skips undefined fields (upstream-headers.ts).
    this.ctx.req.headers[lower] = undefined;
    this.headersSeen = undefined;
  }
}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const FIELD_VALUE = /^[^\x00-\x08\x0a-\x1f\x7f]*$/;

/** Field names found writable already: a policy (the header rules above all) writes the same few on every request. */
const writable = new Set<string>();

/** The lower-case name, once it is a field name the gateway does not own and the value is safe on the wire. */
export function checkedField(name: string, value?: string): string {
  const lower = typeof name === 'string' ? name.toLowerCase() : '';
  if (!writable.has(lower)) {
    if (!TOKEN.test(lower)) throw new TypeError(`"${String(name)}" is not a header field name`);
    // Hidden fields may be written (an upstream credential; cookies dropped), never read.
    const owned = ownedFieldReason(lower);
    if (owned) throw new TypeError(`a policy may not change it: ${owned}`);
    if (writable.size >= 10_000) writable.clear();
    writable.add(lower);
  }
  if (value !== undefined && (typeof value !== 'string' || !FIELD_VALUE.test(value)))
    throw new TypeError(`the value of "${lower}" must be a string without control characters`);
  return lower;
}

/** One policy's context for one request: the shared request view, the policy's own tools. */
export class PolicyRequestContext implements ForwardContext, ResponseHeadContext, AnswerContext {
  private logSeen?: PolicyLogger;

  constructor(
    private readonly view: PolicyRequestView,
    private readonly tools: PolicyTools,
  ) {}

  get requestId(): string {
    return this.view.ctx.requestId;
  }
  get request(): PolicyRequest {
    return this.view.request;
  }
  get consumer(): PolicyConsumer | undefined {
    return this.view.consumer;
  }
  get clientAddress(): string {
    return this.view.clientAddress;
  }
  get service(): string {
    return this.view.service;
  }
  get kv(): PolicyKv {
    return this.tools.kv;
  }
  get metrics(): PolicyMetrics {
    return this.tools.metrics;
  }
  get log(): PolicyLogger {
    if (!this.logSeen) {
      const { logger, name } = this.tools;
      const reqId = this.view.ctx.requestId;
      const line = (level: 'debug' | 'info' | 'warn' | 'error') => (fields: Record<string, unknown>, message: string) =>
        logger[level]({ ...fields, policy: name, reqId }, message);
      this.logSeen = { debug: line('debug'), info: line('info'), warn: line('warn'), error: line('error') };
    }
    return this.logSeen;
  }

  get response(): ResponseHeadContext['response'] & AnswerContext['response'] {
    const res = this.view.response;
    if (!res) throw new TypeError('the response is known only in the responseHead and afterAnswer phases');
    const aborted = this.view.closed && !responseCompleted(res);
    return {
      status: aborted ? 0 : res.statusCode,
      aborted,
      durationMs: performance.now() - this.view.ctx.startedAtMs,
      header: (name: string) => {
        const value = res.getHeader(name);
        return Array.isArray(value) ? Object.freeze([...value]) : value;
      },
    };
  }

  setRequestHeader(name: string, value: string): void {
    this.view.setRequestHeader(name, value);
  }
  removeRequestHeader(name: string): void {
    this.view.removeRequestHeader(name);
  }
  setResponseHeader(name: string, value: string): void {
    const res = this.needResponse();
    const lower = checkedField(name, value);
    res.setHeader(lower, value);
    this.view.responseFieldsSet.push(lower);
  }
  removeResponseHeader(name: string): void {
    this.needResponse().removeHeader(checkedField(name));
  }

  private needResponse(): ServerResponse {
    const res = this.view.response;
    if (!res || res.headersSent) throw new TypeError('response fields can be changed only in the responseHead phase');
    return res;
  }
}
