// What a policy sees of one request (docs/plugins.md, "The context"). Read-only views built by the
// gateway (gateway/user-policies/policy-context.ts); never the client's credential, the cookies the
// gateway consumes, nor the signed assertion it sends upstream.

/** Request header fields as Node gives them (lower-case names), without the credential fields. */
export type PolicyHeaders = Readonly<Record<string, string | readonly string[] | undefined>>;

export interface PolicyRequest {
  readonly method: string;
  /** The canonical path (the one every policy, log line and the upstream see), without the query. */
  readonly path: string;
  /** The query string without its `?`; "" when there is none. */
  readonly query: string;
  /** Every field but Authorization, Proxy-Authorization, Cookie, Sec-WebSocket-Protocol and the gateway's assertion. */
  readonly headers: PolicyHeaders;
}

/** The authenticated caller: an API key's public record or a JWT's subject. */
export interface PolicyConsumer {
  /** The key's public id (`tg_…`) or `jwt:<issuer>:<subject>`; never the key itself. */
  readonly id: string;
  readonly plan: string;
  /** The customer the key belongs to, when it has one. */
  readonly owner?: string;
  /** What the key or token may do (its scopes; empty when it has none). */
  readonly scopes: readonly string[];
  /** A caller without a credential, admitted per client address on an anonymous route (`id` is `anon:…`). */
  readonly anonymous: boolean;
}

/** A small key-value store, namespaced per policy name: Redis when the gateway has one (shared by replicas), else memory. */
export interface PolicyKv {
  get(key: string): Promise<string | undefined>;
  /** Stores `value` for `ttlSeconds` (1 s to 30 days). */
  set(key: string, value: string, ttlSeconds: number): Promise<void>;
  /** Stores `value` only if `key` holds nothing: true when it did (atomic across replicas). */
  add(key: string, value: string, ttlSeconds: number): Promise<boolean>;
  delete(key: string): Promise<void>;
}

/** A logger whose lines carry the policy's name and the request id. */
export interface PolicyLogger {
  debug(fields: Record<string, unknown>, message: string): void;
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

/**
 * Counters scoped to the policy: `tollgate_policy_events_total{policy, event}` on the admin port's
 * /metrics. At most 50 distinct events per policy; more are counted as `other`.
 */
export interface PolicyMetrics {
  count(event: string, by?: number): void;
}

/** Every phase's context. */
export interface PolicyContext {
  readonly requestId: string;
  readonly request: PolicyRequest;
  /** Undefined before authentication (never in the phases a policy can hook). */
  readonly consumer?: PolicyConsumer;
  /** The client's address, as the gateway trusts it (`gateway.trustProxyHops` or `gateway.trustedProxies`). */
  readonly clientAddress: string;
  /** The service the path routes to (`default`: upstream.url). */
  readonly service: string;
  readonly log: PolicyLogger;
  readonly metrics: PolicyMetrics;
  readonly kv: PolicyKv;
}

/** beforeForward: the request the service's targets will receive. */
export interface ForwardContext extends PolicyContext {
  /** Sets a request field (a field the gateway owns, e.g. X-Tollgate-*, Host, is refused with a throw). */
  setRequestHeader(name: string, value: string): void;
  removeRequestHeader(name: string): void;
}

/** responseHead: the target's response head, as it is relayed (never the gateway's own Error bodies). */
export interface ResponseHeadContext extends PolicyContext {
  readonly response: { readonly status: number; header(name: string): string | number | readonly string[] | undefined };
  setResponseHeader(name: string, value: string): void;
  removeResponseHeader(name: string): void;
}

/** afterAnswer: the answer as the client got it. */
export interface AnswerContext extends PolicyContext {
  /** `status`: the final status (0 when the client went away first); `durationMs` from the request's arrival. */
  readonly response: { readonly status: number; readonly aborted: boolean; readonly durationMs: number };
}
