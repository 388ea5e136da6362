import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { ProxyTrust } from '../http/proxy-trust.js';
import { errors, type Dispatcher, type Pool } from 'undici';
import { sendError } from '../errors/render.js';
import { discardRestOfBody } from '../http/discard-rest-of-body.js';
import { forwardedValues } from '../http/forwarded-headers.js';
import { responseCompleted } from '../http/response-completed.js';
import type { BodyFraming } from '../http/request-framing.js';
import type { Logger } from '../observability/log.js';
import type { HistogramSeries } from '../observability/deferred-metrics.js';
import type { Metrics } from '../observability/metrics.js';
import { ClientBody } from '../upstream/client-body.js';
import { freshConnection } from '../upstream/connection-pool.js';
import { failureOf, isRepeatable, RETRYABLE_STATUS, shouldRetry, unreachable, type Failure } from '../upstream/retry-policy.js';
import type { Service } from '../upstream/service.js';
import type { Route } from '../upstream/service-routes.js';
import type { Target } from '../upstream/target.js';
import type { Upstreams } from '../upstream/upstreams.js';
import { answerInternalError } from './answer-fault.js';
import { AssertionRejections } from './assertion-rejections.js';
import type { RequestContext } from './context.js';
import { responseHeadersOf } from './upstream-response-fields.js';
import { copyResponseHeaders } from './upstream-response-headers.js';

/** What the edge decided about one request before the chain ran (server.ts). */
export interface ForwardPlan {
  body: BodyFraming;
  /** The Host the upstream receives: the absolute-form authority, else the client's Host. */
  host: string;
  /** A response cache watching this exchange (gateway/caching-proxy.ts); absent: relayed only. */
  tee?: ResponseTee;
}

/**
 * What a response cache sees of an exchange: the final response head and body as relayed, and
 * the chance to answer itself instead (a 304 to its own revalidation, a stored response standing
 * in for an upstream error). It writes nothing through the exchange: it answers on `ctx.res`.
 */
export interface ResponseTee {
  /**
   * A final response head from the upstream (after retries, never a dropped 5xx). true: the
   * cache answers instead (`answer` follows once the upstream's body is read); false: relayed.
   */
  head(status: number, headers: IncomingHttpHeaders): boolean;
  /** A body chunk as relayed. */
  data(chunk: Buffer): void;
  /** The relayed response is complete; a promise holds the response's end until it settles (an invalidation every replica must see first). */
  end(): void | Promise<void>;
  /** The relayed response broke off: nothing of it may be kept. */
  abort(): void;
  /** The cache answers now (after `head` said so, or after a failure it offered to cover). */
  answer(): void;
  /** The exchange failed before any response was sent: true if the cache answers instead (stale-if-error). */
  covers(failure: 'timeout' | 'error'): boolean;
}

/**
 * A retryable 5xx is read to its end to keep its connection, but no further than this: past it the
 * try is cut (its connection closed) and the retry goes ahead. It is also cut at the service's
 * deadline. Else an endless 503 body held the client and the retry for ever (each byte resets
 * undici's idle bodyTimeout).
 */
const DROP_MAX_BYTES = 64 * 1024;

/** More interim (1xx) responses than this before the final one is an upstream flooding us. */
const MAX_INTERIM_RESPONSES = 8;

/**
 * A try whose connection came sooner than this after it was sent did not wait in the pool's
 * queue (onConnect): only a try that waited keeps the gateway's deadline timer.
 */
const NOT_QUEUED_MS = 5;

/** Upstream too slow (504 gateway_timeout), as opposed to broken (502 bad_gateway). */
const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT']);

/**
 * Transport only, on undici's connection pools (not http-proxy: its passes rewrite framing —
 * `content-length: 0` on DELETE/OPTIONS while still streaming the body —, copy the upstream's
 * `Connection` to the client and write an error after a response has ended; see docs/security.md;
 * and not node:http's client: the same exchange costs ~15 µs more CPU through its Agent and
 * ClientRequest, measured in README "Performance"). Forwards a request that passed the policy
 * chain to the service its path routes to (upstream/service-routes.ts), on a target the service
 * chooses (upstream/service.ts), tried again by the rule of upstream/retry-policy.ts:
 * - the body is framed by the gateway: exactly what the parser delimited, with the length or
 *   chunking the edge chose, never an unframed stream;
 * - refused or reset before the response → 502 bad_gateway; no response head within the
 *   service's time (or a body idle that long) → 504 gateway_timeout; no target in rotation → 503
 *   upstream_unavailable;
 * - any error once the response has started destroys this one exchange and is counted; nothing
 *   is ever written to a response that has ended.
 */
export function createUpstreamProxy(upstreams: Upstreams, proxyTrust: ProxyTrust, logger: Logger, metrics: Metrics) {
  const assertions = new AssertionRejections(logger, metrics);
  const shared: Shared = { logger, metrics, assertions, delivered: new WeakSet() };
  const fallbackHost = new URL(upstreams.fallback.targets[0]!.url).host;

  function forward(ctx: RequestContext, plan: ForwardPlan): void {
    const { req, res } = ctx;
    // The client left while the policy chain ran: its close event is past, so nothing below would
    // ever tear the upstream request down. Send none. A pipelined request queued behind another
    // has a response not yet bound to the socket (never destroyed with it): its request and
    // socket tell (else it went out for a gone client, with an empty X-Forwarded-For).
    // A request whose body a policy read whole is destroyed by then (autoDestroy): its socket tells.
    if (res.destroyed || (req.destroyed && !(ctx.body && req.complete)) || req.socket.destroyed) return;
    const route = ctx.route ?? upstreams.route(req.url ?? '/');
    const headers = req.headers;
    const host = plan.host || fallbackHost;
    Object.assign(headers, forwardedValues(req, proxyTrust, host));
    headers.host = host;
    // A body a policy read whole (OpenAPI validation) goes as those bytes, with their length.
    const read = ctx.body;
    const hasBody = read ? read.length > 0 : plan.body.kind === 'chunked' || (plan.body.kind === 'length' && plan.body.bytes > 0);
    // A length the client declared is forwarded as such (undici checks the body against it); a
    // chunked body goes chunked, or with its exact length when it had fully arrived before it was
    // forwarded (undici measures a body stream that has ended): framed once, either way.
    if (read && hasBody) headers['content-length'] = String(read.length);
    else if (plan.body.kind === 'length' && hasBody) headers['content-length'] = String(plan.body.bytes);

    const method = req.method ?? 'GET';
    // A body is kept for a replay only where one could follow its sending (bounded, client-body.ts).
    const keep = hasBody && isRepeatable(method, headers['idempotency-key'] !== undefined, route.service.config.retries);
    const exchange = new Exchange(
      shared,
      ctx,
      route,
      {
        method,
        path: route.path,
        headers: fieldList(headers),
        body: read && hasBody ? read : hasBody ? new ClientBody(req, keep) : null,
      },
      plan.tee,
    );
    req.on('error', exchange.clientBroke);
    res.on('close', exchange.clientClosed);
    if (!hasBody && !read) req.resume();
    exchange.start();
  }

  return {
    forward,
    /** Counts what a target sends past a complete response (called for every target's pool). */
    watchPool(pool: Pool): void {
      // Bytes an upstream sends past a complete response frame nothing: undici drops that socket
      // and no exchange hears of it (each already ended). Counted here, once, unless an exchange got it.
      pool.on('disconnect', (_origin, _targets, err) => {
        if (shared.delivered.has(err)) return;
        if (err instanceof errors.HTTPParserError || (err instanceof errors.SocketError && err.message === 'bad response')) {
          metrics.exchangeErrors.inc({ side: 'upstream' });
          metrics.upstreamErrors.inc({ kind: 'after_response' });
        }
      });
    },
    /** For /readyz: the upstream accepts the gateway's assertion (no rejection lately). */
    assertionAccepted: () => assertions.accepted(),
  };
}

interface Shared {
  logger: Logger;
  metrics: Metrics;
  assertions: AssertionRejections;
  /** Errors an exchange was told of (the pool's disconnect event reports them again). */
  delivered: WeakSet<Error>;
}

type UpstreamDispatch = Dispatcher.DispatchOptions & { body: ClientBody | Buffer | null };

/**
 * One client request and its tries upstream, as undici's dispatch handler: its callbacks are
 * methods of one object per exchange, not a closure and a listener each. Tries run one after
 * another, and a try is over (undici's onComplete or onError) before the next is sent.
 */
class Exchange implements Dispatcher.DispatchHandler {
  private abortUpstream?: (err?: Error) => void;
  private interim = 0;
  /** Upstream headers already set on `res` (unsent): an error answer must not carry them. */
  private copied: string[] = [];
  /** The final response has been settled: relayed to its end (a 204/304 with its head), or answered as an error. */
  private settled = false;
  private failed = false;
  /** A fault of ours was answered (ourFault): nothing more is written for this exchange. */
  private faulted = false;
  private clientGone = false;
  /** A possible assertion refusal (AssertionRejections): its head and body, held until its end. */
  private held?: { status: number; headers: IncomingHttpHeaders; chunks: Buffer[] };
  private resumeUpstream?: () => void;
  /**
   * The service's deadline, held by the gateway where undici's per-try timers cannot hold it: a
   * try that waited in the pool's queue, one whose target sends interim responses, a retryable
   * 5xx being dropped (deadlinePassed). Armed for those only; it ends with its try.
   */
  private deadlineTimer?: NodeJS.Timeout;
  private readonly service: Service;
  private target!: Target;
  /** Targets of the earlier tries (made on the first retry: most requests never need it). */
  private tried?: Set<Target>;
  private tries = 0;
  /** A choice of this request found no target in rotation (counted once: a request, not a try). */
  private panicked = false;
  private tryStartedMs = 0;
  /** The current try waited in its pool's queue for a connection. */
  private waitedInQueue = false;
  /** The gateway's deadline timer cut the current try (deadlinePassed). */
  private cutAtDeadline = false;
  /** When the current try's final response head arrived (0: not yet): the end of its latency. */
  private tryHeadMs = 0;
  /** The current try is a retry counted in the service's retries in flight. */
  private retrying = false;
  /** The retry retryAfter granted counts in the budget (false: a failover, retry-policy.ts rule 4). */
  private nextRetryBudgeted = true;
  /** A retry went to a target already tried, on a new connection (at most once). */
  private sameTargetAgain = false;
  /** Reading a retryable 5xx answer to drop it; the next try follows its end. */
  private dropping?: { backoffMs: number; bytes: number };
  /** A final response head was taken for the client: the target answered, and no retry may follow. */
  private answered = false;
  private backoffTimer?: NodeJS.Timeout;
  /** When the service's time runs out: `timeoutMs` after the first try went out. */
  private deadlineMs = 0;
  /** The response cache answers instead of the upstream's response (its body is read and dropped). */
  private absorbed = false;
  private absorbedStatus = 0;

  constructor(
    private readonly shared: Shared,
    private readonly ctx: RequestContext,
    route: Route,
    private dispatch: UpstreamDispatch,
    private readonly tee?: ResponseTee,
  ) {
    this.service = route.service;
    this.service.inFlight++;
  }

  private get req(): IncomingMessage {
    return this.ctx.req;
  }

  private get res(): ServerResponse {
    return this.ctx.res;
  }

  start(): void {
    this.send(false);
  }

  /** Sends the next try: to a target the service chooses, or (`again`) to the same one on a new connection. */
  private send(again: boolean): void {
    if (!again) {
      if (this.tries > 0) (this.tried ??= new Set()).add(this.target);
      const choice = this.service.choose(this.tried, !this.panicked);
      if ('unavailable' in choice) return this.unavailable(choice.retryAfterSeconds);
      this.target = choice.target;
      if (choice.panicked) this.panicked = true;
    }
    const { target, service } = this;
    this.tries++;
    this.ctx.upstream = { service: service.name, target: target.url, tries: this.tries };
    target.inFlight++;
    this.tryStartedMs = performance.now();
    this.tryHeadMs = 0;
    this.waitedInQueue = false;
    this.cutAtDeadline = false;
    if (this.tries === 1) this.deadlineMs = this.tryStartedMs + service.config.timeoutMs;
    // Tracing on: this try's span, and its traceparent in the fields the target receives.
    const trace = this.ctx.trace;
    // A copy for a try that changes it (a target path, trace fields, a retry's timeout); the
    // common first try to a bare origin goes as planned.
    const dispatch =
      this.tries === 1 && target.basePath === '' && !trace
        ? this.dispatch
        : { ...this.dispatch, path: target.basePath + this.dispatch.path };
    if (trace)
      dispatch.headers = trace.startTry(this.dispatch.headers as string[], dispatch.method, service.name, target.url, this.tries - 1);
    if (this.tries > 1) {
      // A retry has what is left of the service's time.
      const msLeft = Math.max(1, Math.round(this.deadlineMs - this.tryStartedMs));
      dispatch.headersTimeout = Math.min(msLeft, service.config.tryTimeoutMs || msLeft);
    }
    if (again) {
      const client = freshConnection(target.origin, { timeoutMs: service.config.timeoutMs, maxSockets: 1, tls: service.config.tls });
      client.dispatch(dispatch, this);
      // Closes once that one request is done.
      client.close().catch(() => undefined);
      return;
    }
    // false: every connection is busy and the request may wait in the pool's queue, where no
    // undici timeout runs (headersTimeout starts once it is written): bounded here instead.
    if (!target.pool.dispatch(dispatch, this) && !this.abortUpstream && !this.failed) this.armDeadline();
  }

  /**
   * The current try is over: load, retry budget, passive health and metrics. A try the gateway
   * abandoned (its client left, or it waited too long in the queue) says nothing of the target.
   */
  private endTry(outcome: TryOutcome): void {
    const { target, service, shared } = this;
    // The deadline timer ends with its try: it must never fire into the next try's backoff.
    this.clearDeadline();
    this.ctx.trace?.endTry(outcome);
    target.inFlight--;
    this.leaveBudget();
    if (outcome !== 'abandoned') service.report(target, outcome === 'ok');
    const counted = tryMetricsOf(shared.metrics, service, target);
    (counted.outcomes[outcome] ??= shared.metrics.upstreamTries.child({ service: service.name, target: target.url, outcome })).n++;
    // To the response head, as the metric says (a body's transfer is the client's pace too).
    const endMs = this.tryHeadMs || performance.now();
    shared.metrics.upstreamTrySeconds.observeOn(counted.seconds, (endMs - this.tryStartedMs) / 1000);
  }

  /**
   * Whether a failed try goes again (retry-policy.ts), and then after how long; the body is made
   * ready for it here.
   */
  private retryAfter(failure: Failure, err?: Error): number | undefined {
    if (this.clientGone || this.res.headersSent || this.settled || this.held || this.answered || this.interim > 0) return undefined;
    const { service, dispatch } = this;
    // Another target, or this one again on a new connection once, after a closed connection; a
    // retry goes to the service as the latest reload left it (service.ts, replaceWith).
    const targets = service.current.targets;
    const others = targets.length > 1 || !targets.includes(this.target);
    if (!others && (failure !== 'closed' || this.sameTargetAgain)) return undefined;
    const answer = shouldRetry({
      service,
      failure,
      method: dispatch.method,
      idempotencyKey: this.req.headers['idempotency-key'] !== undefined,
      bodyReplayable: !(dispatch.body instanceof ClientBody) || dispatch.body.canReplay(),
      triesSoFar: this.tries,
      msLeft: this.deadlineMs - performance.now(),
      failover: (failure === 'closed' || (failure === 'connect' && err !== undefined && unreachable(err))) && this.anotherInRotation(),
    });
    if (!answer.retry) {
      if (answer.budgetExhausted) this.shared.metrics.retryBudgetExhausted.inc({ service: service.name });
      return undefined;
    }
    if (dispatch.body instanceof ClientBody) {
      const body = dispatch.body.replay();
      if (body === undefined) return undefined;
      this.dispatch = { ...dispatch, body };
    } else if (Buffer.isBuffer(dispatch.body)) {
      this.dispatch = { ...dispatch };
    }
    this.shared.metrics.upstreamRetries.inc({ service: service.name, reason: failure });
    this.nextRetryBudgeted = answer.budgeted;
    return answer.backoffMs;
  }

  private retry(failure: Failure, backoffMs: number): void {
    // The client left while the failed try was being read: nobody to retry for.
    if (this.clientGone) return this.fail(new errors.RequestAbortedError());
    // The dropped answer took what was left of the service's time: 504, no try doomed to time out.
    if (performance.now() + backoffMs >= this.deadlineMs)
      return this.fail(new errors.HeadersTimeoutError('the service timeout passed before the retry'));
    this.abortUpstream = undefined;
    this.interim = 0;
    // Counted in the service's budget while it runs, unless it is outside it (retry-policy.ts, rule 4).
    if (this.nextRetryBudgeted) {
      this.service.retriesInFlight++;
      this.retrying = true;
    }
    const targets = this.service.current.targets;
    const again = failure === 'closed' && targets.length === 1 && targets[0] === this.target;
    if (again) this.sameTargetAgain = true;
    if (backoffMs <= 0) return this.send(again);
    this.backoffTimer = setTimeout(() => {
      this.backoffTimer = undefined;
      if (this.clientGone) {
        this.leaveBudget();
        return;
      }
      // A timer's throw reaches no caller that could answer the client: answered here.
      try {
        this.send(again);
      } catch (err) {
        this.ourFault(err);
      }
    }, backoffMs);
  }

  /** Another target of the service (as the latest reload left it) is in rotation and untried by this request. */
  private anotherInRotation(): boolean {
    const tried = this.tried;
    return this.service.current.targets.some((t) => t !== this.target && !tried?.has(t) && t.health.inRotation());
  }

  /** A counted retry is over (or never sent): its place in the service's budget is given back. */
  private leaveBudget(): void {
    if (!this.retrying) return;
    this.retrying = false;
    this.service.retriesInFlight--;
  }

  private unavailable(retryAfterSeconds: number): void {
    this.settled = true;
    // A retry that found no target in rotation: it leaves the retry budget (no endTry follows).
    this.leaveBudget();
    this.shared.metrics.upstreamErrors.inc({ kind: 'upstream_unavailable' });
    this.tee?.abort();
    if (this.tee?.covers('error')) return this.tee.answer();
    this.ctx.reservation?.unreached();
    sendError(this.res, 'upstream_unavailable', undefined, { 'retry-after': retryAfterSeconds });
  }

  onConnect(abort: (err?: Error) => void): void {
    // A try that really waited in the queue keeps its timer: undici's headersTimeout only starts
    // now, so the timer is what holds the wait and the answer together within the service's time.
    // One that did not (pool.dispatch says false for the request that takes the last free
    // connection too, and a streamed body is written a microtask later) gets undici's own timers
    // only, as every other try: at most NOT_QUEUED_MS more than the service's time.
    if (this.deadlineTimer) {
      if (performance.now() - this.tryStartedMs < NOT_QUEUED_MS) this.clearDeadline();
      else this.waitedInQueue = true;
    }
    // Nobody waits for this request any more (its client left, or it was answered 504 while
    // queued): refused by throwing, which undici turns into onError before writing anything and
    // without closing the connection (abort() would destroy a healthy pooled socket).
    if (this.clientGone || this.failed) throw new errors.RequestAbortedError();
    this.abortUpstream = abort;
  }

  private armDeadline(): void {
    this.deadlineTimer ??= setTimeout(this.deadlinePassed, Math.max(1, this.deadlineMs - performance.now()));
  }

  private clearDeadline(): void {
    if (this.deadlineTimer === undefined) return;
    clearTimeout(this.deadlineTimer);
    this.deadlineTimer = undefined;
  }

  /**
   * The service's time is up for the current try: a retryable 5xx still being dropped is cut (the
   * retry then finds no time left: 504); a request still queued is answered 504; one sent (after a
   * wait, or followed by interim responses) without a final head yet is cut, and onError finds no
   * time left for another.
   */
  private readonly deadlinePassed = (): void => {
    this.deadlineTimer = undefined;
    // A timer's throw reaches no caller that could answer the client: answered here.
    try {
      this.deadlineReached();
    } catch (err) {
      this.ourFault(err);
    }
  };

  private deadlineReached(): void {
    if (this.dropping) return this.dropTooLong();
    if (this.abortUpstream) {
      // Not while the client is still sending its body: that is the client's pace, and undici's
      // own timers (restarted by every chunk written) apply to it.
      if (this.answered || this.held || this.settled) return;
      const body = this.dispatch.body;
      if (body instanceof ClientBody && !body.complete) return;
      this.cutAtDeadline = true;
      this.abortUpstream(new errors.HeadersTimeoutError('no response head within the service timeout'));
      return;
    }
    // Still in the pool's queue: undici will refuse it at onConnect (this.failed) and say so in
    // an onError that finds the exchange failed and the try already ended here.
    this.endTry('abandoned');
    this.fail(new errors.HeadersTimeoutError('queued for a connection longer than the service timeout'));
  }

  // undici's callbacks run our code: a throw in them is a fault of ours, never the target's, and
  // undici would otherwise read it as a broken connection (a 502, a retry, a target blamed).
  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    try {
      return this.head(statusCode, rawHeaders, resume);
    } catch (err) {
      return this.ourFault(err);
    }
  }

  onData(chunk: Buffer): boolean {
    try {
      return this.data(chunk);
    } catch (err) {
      return this.ourFault(err);
    }
  }

  onComplete(trailers: string[] | null): void {
    try {
      // The reported cost's trailer, before the response ends (a forwarded one goes with it).
      if (!this.dropping) this.ctx.reservation?.trailers(trailers, this.res);
      this.complete();
    } catch (err) {
      this.ourFault(err);
    }
  }

  /**
   * A throw of ours while relaying: the try is abandoned (it says nothing of the target), the
   * upstream request is cut, and the client gets one 500 `internal_error` with its connection
   * closed, or a cut response if one had started (gateway/answer-fault.ts says the same for the
   * chain). The onError that the cut brings finds the exchange failed.
   */
  private ourFault(err: unknown): false {
    // Once only; not `failed`: a fault inside fail() itself (writing the 502) must still be answered.
    if (this.faulted) return false;
    this.faulted = true;
    this.failed = true;
    if (!this.settled) this.endTry('abandoned');
    this.settled = true;
    this.clearDeadline();
    this.shared.logger.error(
      { err, reqId: this.req.headers['x-request-id'], service: this.service.name },
      'relay failed: answered 500 internal_error',
    );
    this.abortUpstream?.(err instanceof Error ? err : new Error(String(err)));
    answerInternalError(this.req, this.res, this.copied);
    return false;
  }

  private head(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    this.ctx.trace?.tryStatus(statusCode);
    if (statusCode < 200) {
      // 1xx are not relayed (the gateway answered any Expect itself); a flood of them ends it.
      if (++this.interim > MAX_INTERIM_RESPONSES)
        this.abortUpstream?.(new Error(`more than ${MAX_INTERIM_RESPONSES} interim (1xx) responses`));
      // undici restarts its header timer on each one: from the first, the service's deadline is
      // held by the gateway's own timer (a target trickling 1xx would get 9 × timeoutMs otherwise).
      else if (this.interim === 1) this.armDeadline();
      return true;
    }
    this.tryHeadMs = performance.now();
    if (RETRYABLE_STATUS.has(statusCode)) {
      // Read to its end and dropped when another try may follow (the connection stays reusable).
      const backoffMs = this.retryAfter('status');
      if (backoffMs !== undefined) {
        this.dropping = { backoffMs, bytes: 0 };
        this.armDeadline();
        return true;
      }
    }
    const headers = responseHeadersOf(rawHeaders);
    // The cost the upstream reports: read, and removed before the cache or the client sees it.
    this.ctx.reservation?.head(headers);
    if (AssertionRejections.mayBeRejection(statusCode, headers)) {
      this.held = { status: statusCode, headers, chunks: [] };
      return true;
    }
    this.resumeUpstream = resume;
    if (this.tee?.head(statusCode, headers)) {
      this.absorbed = true;
      this.absorbedStatus = statusCode;
      this.answered = true;
      this.clearDeadline();
      if (statusCode === 204 || statusCode === 304) {
        this.settled = true;
        this.endTry('ok');
        this.tee.answer();
      }
      return true;
    }
    this.relayHead(statusCode, headers);
    if (statusCode === 204 || statusCode === 304) {
      // No content whatever its Content-Length says (RFC 9110 §6.4.1; a 304 may carry the length
      // a 200 would have had, §8.6): complete now. undici then still compares that length with
      // the 0 bytes it read and fails the exchange (UND_ERR_RES_CONTENT_LENGTH_MISMATCH).
      this.settled = true;
      this.endTry(statusCode >= 500 ? 'status_5xx' : 'ok');
      this.endResponse();
    }
    return true;
  }

  private data(chunk: Buffer): boolean {
    if (this.dropping) {
      if ((this.dropping.bytes += chunk.length) > DROP_MAX_BYTES) this.dropTooLong();
      return true;
    }
    if (this.held) {
      this.held.chunks.push(chunk);
      return true;
    }
    if (this.absorbed) return true;
    this.tee?.data(chunk);
    if (this.res.write(chunk)) return true;
    // The client reads slower than the upstream sends: the upstream waits for it.
    this.res.once('drain', this.resumeUpstream!);
    return false;
  }

  private complete(): void {
    if (this.dropping) return this.retryDropped();
    // Settled before its end only as a 204/304, answered with its head.
    if (this.settled) return;
    this.settled = true;
    const status = this.held?.status ?? (this.absorbed ? this.absorbedStatus : this.res.statusCode);
    this.endTry(status >= 500 ? 'status_5xx' : 'ok');
    const held = this.held;
    if (this.absorbed) return this.tee!.answer();
    if (!held) return this.endResponse();
    const body = Buffer.concat(held.chunks);
    if (!AssertionRejections.isRejection(body)) {
      if (this.tee?.head(held.status, held.headers)) return this.tee.answer();
      this.relayHead(held.status, held.headers);
      this.tee?.data(body);
      this.res.write(body);
      return this.endResponse();
    }
    const { assertions, metrics } = this.shared;
    assertions.record(this.target.url);
    metrics.upstreamErrors.inc({ kind: 'assertion_rejected' });
    this.ctx.reservation?.unreached();
    sendError(this.res, 'bad_gateway', 'The upstream refused the gateway’s credentials: a gateway configuration fault, not yours.');
  }

  /** Ends the relayed response, after what the cache must do first (tee.end). */
  private endResponse(): void {
    const pending = this.tee?.end();
    if (!pending) return void this.res.end();
    void pending.finally(() => this.res.end());
  }

  /** A retryable 5xx has been read and dropped (to its end, or cut): the next try follows. */
  private retryDropped(): void {
    const { backoffMs } = this.dropping!;
    this.dropping = undefined;
    this.endTry('status_5xx');
    this.retry('status', backoffMs);
  }

  onError(err: Error): void {
    // Answering a failed try runs our code too (the retry's choice, the 502's head): a throw there
    // would reach undici's errorRequest, which only re-emits it, and the client would wait for ever.
    try {
      this.error(err);
    } catch (fault) {
      this.ourFault(fault);
    }
  }

  private error(err: Error): void {
    const { shared } = this;
    shared.delivered.add(err);
    this.clearDeadline();
    if (this.failed) return;
    // undici's length check on a 204/304 already relayed in full (the only response settled
    // before undici's end of it): not a fault of the upstream.
    if (this.settled && (err as NodeJS.ErrnoException).code === 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH') return;
    const failure = failureOf(err);
    // The dropped 5xx broke off (or was cut): the retry it was read for goes ahead.
    if (this.dropping) return this.retryDropped();
    // The upstream's answer to be dropped broke off: the cache's own answer stands.
    if (this.absorbed) {
      if (!this.settled) {
        this.settled = true;
        this.endTry(failure ?? 'error');
        this.tee!.answer();
      }
      return;
    }
    // A try cut at the deadline after waiting for a connection says nothing of its target.
    const abandoned = this.clientGone || (this.cutAtDeadline && this.waitedInQueue);
    if (!this.settled) this.endTry(abandoned ? 'abandoned' : (failure ?? 'error'));
    if (failure && !this.clientGone) {
      const backoffMs = this.retryAfter(failure, err);
      if (backoffMs !== undefined) return this.retry(failure, backoffMs);
    }
    this.fail(err);
  }

  /** The exchange ends in failure: an Error body if nothing was sent yet, else a cut response. */
  private fail(err: Error): void {
    const { res, shared } = this;
    const { metrics } = shared;
    this.failed = true;
    // The client went away first (its close aborted the upstream request): nobody to answer.
    if (this.clientGone || (res.destroyed && !res.headersSent)) return;
    if (this.settled || res.headersSent) {
      this.tee?.abort();
      // The response is under way: only this exchange ends, counted; the client sees a truncated
      // response, never a corrupted one.
      metrics.exchangeErrors.inc({ side: 'upstream' });
      metrics.upstreamErrors.inc({ kind: res.writableEnded ? 'after_response' : 'aborted_mid_response' });
      if (!res.writableEnded) res.destroy();
      return;
    }
    this.settled = true;
    for (const name of this.copied) res.removeHeader(name);
    const timedOut = TIMEOUT_CODES.has((err as NodeJS.ErrnoException).code ?? '');
    this.tee?.abort();
    if (this.tee?.covers(timedOut ? 'timeout' : 'error')) {
      metrics.upstreamErrors.inc({ kind: timedOut ? 'gateway_timeout' : 'bad_gateway' });
      return this.tee.answer();
    }
    // No answer came: a reported cost's reservation is given back (reported-cost/cost-reservation.ts).
    this.ctx.reservation?.unreached();
    if (timedOut) {
      metrics.upstreamErrors.inc({ kind: 'gateway_timeout' });
      sendError(res, 'gateway_timeout');
      return;
    }
    metrics.upstreamErrors.inc({ kind: 'bad_gateway' });
    shared.logger.warn(
      {
        err: { code: (err as NodeJS.ErrnoException).code, message: err.message },
        reqId: this.req.headers['x-request-id'],
        service: this.service.name,
        target: this.target?.url,
        tries: this.tries,
      },
      'upstream failed',
    );
    sendError(res, 'bad_gateway');
  }

  /**
   * The response has ended, or the client left. A request body the upstream did not read to its
   * end — it answered early (413, 401, …) or failed — is read and dropped, bounded, so the
   * client's next request on this connection is reached, not stuck behind it.
   */
  readonly clientClosed = (): void => {
    this.service.inFlight--;
    if (responseCompleted(this.res)) {
      if (!this.req.complete) {
        if (this.dispatch.body instanceof ClientBody) this.dispatch.body.destroy();
        discardRestOfBody(this.req);
      }
      return;
    }
    this.gone();
  };

  /** The client broke its request body: the upstream request goes too. */
  readonly clientBroke = (): void => {
    this.shared.metrics.exchangeErrors.inc({ side: 'client' });
    this.gone();
  };

  private gone(): void {
    if (this.clientGone) return;
    this.clientGone = true;
    this.tee?.abort();
    if (this.backoffTimer) {
      clearTimeout(this.backoffTimer);
      this.backoffTimer = undefined;
      this.leaveBudget();
    }
    this.abortUpstream?.();
  }

  /** The dropped 5xx is too long or too slow: its try is cut, and onError goes on to the retry. */
  private dropTooLong(): void {
    this.abortUpstream?.(new Error('retryable 5xx body too long or too slow to drop'));
  }

  private relayHead(status: number, headers: IncomingHttpHeaders): void {
    this.answered = true;
    this.clearDeadline();
    this.res.statusCode = status;
    this.copied = copyResponseHeaders(headers, this.res, this.ctx.corsApplies);
    // The service's responseHeaders rules, over what the target sent (never over the gateway's own Error bodies).
    const ruled = this.ctx.responseRules?.applyTo(this.res);
    if (ruled) this.copied.push(...ruled);
  }
}

type TryOutcome = 'ok' | 'status_5xx' | Failure | 'error' | 'abandoned';

/** A target's try metrics, by the handles their label sets resolve to (keyed once, not per try). */
interface TryMetrics {
  service: Service;
  seconds: HistogramSeries;
  outcomes: Partial<Record<TryOutcome, { n: number }>>;
}

const tryMetrics = new WeakMap<Target, TryMetrics>();

function tryMetricsOf(metrics: Metrics, service: Service, target: Target): TryMetrics {
  let kept = tryMetrics.get(target);
  if (kept?.service !== service) {
    kept = { service, seconds: metrics.upstreamTrySeconds.child({ service: service.name, target: target.url }), outcomes: {} };
    tryMetrics.set(target, kept);
  }
  return kept;
}

/**
 * The headers as a flat name/value list, as undici takes them. Node has already joined repeated
 * request fields into one value (`cookie` with `; `, others with `, `).
 */
function fieldList(headers: IncomingHttpHeaders): string[] {
  const list: string[] = [];
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined) continue;
    if (typeof value === 'string') list.push(name, value);
    else for (const item of value) list.push(name, item);
  }
  return list;
}

export type UpstreamProxy = ReturnType<typeof createUpstreamProxy>;
