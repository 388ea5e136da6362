import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ErrorCode } from '../errors/registry.js';
import type { Consumer } from '../auth/consumer.js';
import type { GatewayTrace } from '../tracing/gateway-trace.js';
import type { Route } from '../upstream/service-routes.js';
import type { Access } from './route-access.js';
import type { CostReservation } from './reported-cost/cost-reservation.js';
import type { PolicyRequestView } from './user-policies/policy-context.js';

export type Credential = { kind: 'key'; validUntilMs?: number } | { kind: 'token'; validUntilMs: number };

/** What the policies learn about one request as it passes the chain. */
export interface RequestContext {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly startedAtMs: number;
  requestId: string;
  /**
   * When this request began waiting on Redis, once a wait of it may be followed by another (its
   * key record's read, a lease ask): all its waits share one redis.commandTimeoutMs from then
   * (redis-wait.ts). -Infinity: that wait failed, the time is spent.
   */
  redisWaitSinceMs?: number;
  /** Its time on Redis ran out during a wait: nothing more is sent or taken for it (redis-wait.ts). */
  redisWaitOver?: boolean;
  /** The authenticated caller (an API key's record or a JWT's subject), once `authenticate` has passed. */
  consumer?: Consumer;
  /**
   * What the caller authenticated with, and when that stops being valid: an API key (its
   * expiresAt, if it has one) or a JWT (its exp plus the issuer's clock skew). A WebSocket tunnel
   * the request opens is closed then (websocket-proxy.ts); a ticket minted with a JWT carries it
   * (serve-ws-tickets.ts).
   */
  credential?: Credential;
  /** The client's own access token, when its issuer says `forwardToken: true` (upstream-identity.ts). */
  forwardToken?: string;
  /** Set when a decision was taken without the shared store (degraded mode). */
  degraded?: boolean;
  /** The code a shadow plan would have refused with; the request was admitted (README, "Shadow plans"). */
  shadowRefusal?: ErrorCode;
  /** The code of the policy rejection this request was answered with (server.ts), for the console's traffic counters. */
  refusal?: ErrorCode;
  /**
   * A `cors:` section applies to this request's path (policies/cors.ts): the gateway's CORS fields
   * stand, and the upstream's own Access-Control-* fields are dropped (upstream-response-headers.ts).
   */
  corsApplies?: boolean;
  /**
   * The `Sec-WebSocket-Protocol` entry a WebSocket ticket came in (authenticate-ws-ticket.ts),
   * answered in the 101 when the upstream picks no subprotocol: a browser that offered only it
   * refuses a 101 that names none.
   */
  ticketSubprotocol?: string;
  /** The service the path routes to and the path its targets receive (route-to-service.ts). */
  route?: Route;
  /** What the route asks of its caller: scopes, and whether anonymous callers are admitted (access.ts). */
  access?: Access;
  /** Where the request went upstream: the service, the target of the last try, and how many tries. */
  upstream?: { service: string; target: string; tries: number };
  /** The responseHead hooks in force for this request (user-policies/phases.ts), run where the proxy relays the response head. */
  responseRules?: ResponseRules;
  /** The request body, read whole by a policy (OpenAPI validation): the proxy forwards these bytes. */
  body?: Buffer;
  /** `100 Continue` was sent already (a policy read the body): the server must not send it again. */
  continued?: boolean;
  /** Quota units the configured policies added to the route's cost (user-policies/phases.ts); the quota step charges them. */
  addedCost?: number;
  /** The units reserved for a cost the upstream reports (enforce-quota.ts), settled once the answer is over; the proxy tells it what came. */
  reservation?: CostReservation;
  /** What the configured policies see of this request, made once they first run (user-policies/policy-context.ts). */
  policyView?: PolicyRequestView;
  /** This request's spans, when tracing is on (README, "Tracing"); undefined otherwise: callers use `?.`. */
  trace?: GatewayTrace;
}

/**
 * What runs on the relayed response head (the service's header rules, the configured policies'
 * responseHead hooks): an object with a method rather than a closure stored on the context. V8
 * allocates a function literal assigned to a property (`ctx.x = () => …`) in the old generation,
 * and that closure then held the request's whole graph (its context, the request, the response,
 * the socket's buffers) past every minor GC until the next full one: measured, 5 KB promoted and
 * some 15 µs of GC per request (docs/performance.md, "Your own policies").
 */
export interface ResponseRules {
  /** Applies them to the response about to be relayed; returns the names of the fields they set. */
  applyTo(res: ServerResponse): string[];
}

/** A policy's verdict: go on, answer now with an Error body, or (rarely) answer now with a fixed body. */
export type Decision = typeof CONTINUE | Rejection | Answer;

export interface Rejection {
  readonly code: ErrorCode;
  readonly message?: string;
  readonly headers?: Readonly<Record<string, string | number>>;
  /** More fields of the Error body (request_invalid's `errors`). */
  readonly details?: Readonly<Record<string, unknown>>;
}

/**
 * A complete non-error answer given by a policy, as data: a fixed body prepared once (the public
 * OpenAPI document, served before authentication). The server writes it; the policy does not.
 */
export interface Answer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | number>>;
  readonly body: Buffer;
}

export const CONTINUE = null;

export function isAnswer(decision: Rejection | Answer): decision is Answer {
  return 'body' in decision;
}

export function reject(
  code: ErrorCode,
  message?: string,
  headers?: Record<string, string | number>,
  details?: Record<string, unknown>,
): Rejection {
  return details ? { code, message, headers, details } : { code, message, headers };
}

/**
 * Policies share one signature and return data; none writes the response or proxies.
 * Headers meant for every response (rate-limit fields, request id) are set on `ctx.res`
 * before anything is sent; they survive into error bodies and proxied answers alike.
 */
export type Policy = (ctx: RequestContext) => Decision | Promise<Decision>;
