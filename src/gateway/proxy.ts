import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { errors, type Dispatcher } from 'undici';
import { sendError } from '../errors/render.js';
import { discardRestOfBody } from '../http/discard-rest-of-body.js';
import { forwardedValues } from '../http/forwarded-headers.js';
import type { BodyFraming } from '../http/request-framing.js';
import type { Logger } from '../observability/log.js';
import type { Metrics } from '../observability/metrics.js';
import { AssertionRejections } from './assertion-rejections.js';
import { responseHeadersOf } from './upstream-response-fields.js';
import { copyResponseHeaders } from './upstream-response-headers.js';
import { ClientBody } from '../upstream/client-body.js';
import { connectionPool, freshConnection } from '../upstream/connection-pool.js';
import { mayResendOnFreshConnection } from '../upstream/stale-connection-retry.js';

export interface UpstreamOptions {
  url: string;
  timeoutMs: number;
  maxSockets: number;
}

/** What the edge decided about one request before the chain ran (server.ts). */
export interface ForwardPlan {
  body: BodyFraming;
  /** The Host the upstream receives: the absolute-form authority, else the client's Host. */
  host: string;
}

/** More interim (1xx) responses than this before the final one is an upstream flooding us. */
const MAX_INTERIM_RESPONSES = 8;

/** Upstream too slow (504 gateway_timeout), as opposed to broken (502 bad_gateway). */
const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT']);

/**
 * Transport only, on undici's connection pool (not http-proxy: its passes rewrite framing —
 * `content-length: 0` on DELETE/OPTIONS while still streaming the body —, copy the upstream's
 * `Connection` to the client and write an error after a response has ended; see docs/security.md;
 * and not node:http's client: the same exchange costs ~15 µs more CPU through its Agent and
 * ClientRequest, the largest single cost left on the request path, measured in README
 * "Performance"). Forwards a request that passed the policy chain over a keep-alive pool:
 * - the body is framed by the gateway: exactly what the parser delimited, with the length or
 *   chunking the edge chose, never an unframed stream;
 * - refused or reset before the response → 502 bad_gateway; no response head within `timeoutMs`
 *   (or a body idle that long) → 504 gateway_timeout;
 * - any error once the response has started destroys this one exchange and is counted; nothing
 *   is ever written to a response that has ended.
 */
export function createUpstreamProxy(options: UpstreamOptions, trustedProxyHops: number, logger: Logger, metrics: Metrics) {
  const target = new URL(options.url);
  const basePath = target.pathname === '/' ? '' : target.pathname.replace(/\/$/, '');
  // Kept-alive connections, reused by the rule of connection-pool.ts.
  const pool = connectionPool(target.origin, options);
  const assertions = new AssertionRejections(logger, metrics);
  const shared: Shared = {
    options,
    logger,
    metrics,
    assertions,
    delivered: new WeakSet(),
    // A request found a kept-alive connection closed under it: once more, on a new connection.
    resend(dispatch, handler) {
      metrics.upstreamRetries.inc({ reason: 'closed_connection' });
      const client = freshConnection(target.origin, options);
      client.dispatch(dispatch, handler);
      // Closes once that one request is done.
      client.close().catch(() => undefined);
    },
  };

  // Bytes an upstream sends past a complete response frame nothing: undici drops that socket and
  // no exchange hears of it (each already ended). Counted here, once, unless an exchange got it.
  pool.on('disconnect', (_origin, _targets, err) => {
    if (shared.delivered.has(err)) return;
    if (err instanceof errors.HTTPParserError || (err instanceof errors.SocketError && err.message === 'bad response')) {
      metrics.exchangeErrors.inc({ side: 'upstream' });
      metrics.upstreamErrors.inc({ kind: 'after_response' });
    }
  });

  function forward(req: IncomingMessage, res: ServerResponse, plan: ForwardPlan): void {
    // The client left while the policy chain ran: its close event is past, so nothing below would
    // ever tear the upstream request down. Send none. A pipelined request queued behind another
    // has a response not yet bound to the socket (never destroyed with it): its request and
    // socket tell (else it went out for a gone client, with an empty X-Forwarded-For).
    if (res.destroyed || req.destroyed || req.socket.destroyed) return;
    const headers = req.headers;
    const host = plan.host || target.host;
    Object.assign(headers, forwardedValues(req, trustedProxyHops, host));
    headers.host = host;
    const hasBody = plan.body.kind === 'chunked' || (plan.body.kind === 'length' && plan.body.bytes > 0);
    // A length the client declared is forwarded as such (undici checks the body against it); a
    // chunked body goes chunked, or with its exact length when it had fully arrived before it was
    // forwarded (undici measures a body stream that has ended): framed once, either way.
    if (plan.body.kind === 'length' && hasBody) headers['content-length'] = String(plan.body.bytes);

    const method = req.method ?? 'GET';
    const dispatch = { method, path: basePath + (req.url ?? '/'), headers: fieldList(headers), body: hasBody ? new ClientBody(req) : null };
    const exchange = new Exchange(shared, req, res, dispatch);
    req.on('error', exchange.clientBroke);
    res.on('close', exchange.clientClosed);
    if (!hasBody) req.resume();
    // false: every connection is busy and the request may wait in the pool's queue, where no
    // undici timeout runs (headersTimeout starts once it is written): bounded here instead.
    if (!pool.dispatch(dispatch, exchange)) exchange.waitAtMost(options.timeoutMs);
  }

  return {
    forward,
    /** For /readyz: the upstream accepts the gateway's assertion (no rejection lately). */
    assertionAccepted: () => assertions.accepted(),
    close(): void {
      pool.destroy().catch(() => undefined);
    },
  };
}

interface Shared {
  options: UpstreamOptions;
  logger: Logger;
  metrics: Metrics;
  assertions: AssertionRejections;
  /** Errors an exchange was told of (the pool's disconnect event reports them again). */
  delivered: WeakSet<Error>;
  resend(dispatch: UpstreamDispatch, handler: Exchange): void;
}

type UpstreamDispatch = Dispatcher.DispatchOptions & { body: ClientBody | null };

/**
 * One client request and its upstream request, as undici's dispatch handler: its callbacks are
 * methods of one object per exchange, not a closure and a listener each.
 */
class Exchange implements Dispatcher.DispatchHandler {
  private abortUpstream?: (err?: Error) => void;
  private interim = 0;
  /** Upstream headers already set on `res` (unsent): an error answer must not carry them. */
  private copied: string[] = [];
  /** The final response has been settled: relayed to its end (a 204/304 with its head), or answered as an error. */
  private settled = false;
  private failed = false;
  private clientGone = false;
  /** A possible assertion refusal (AssertionRejections): its head and body, held until its end. */
  private held?: { status: number; headers: IncomingHttpHeaders; chunks: Buffer[] };
  private resumeUpstream?: () => void;
  private queueTimer?: NodeJS.Timeout;
  /** Sent a second time already (stale-connection-retry.ts). */
  private resent = false;

  constructor(
    private readonly shared: Shared,
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    private dispatch: UpstreamDispatch,
  ) {}

  onConnect(abort: (err?: Error) => void): void {
    if (this.queueTimer) clearTimeout(this.queueTimer);
    // Nobody waits for this request any more (its client left, or it was answered 504 while
    // queued): refused by throwing, which undici turns into onError before writing anything and
    // without closing the connection (abort() would destroy a healthy pooled socket).
    if (this.clientGone || this.failed) throw new errors.RequestAbortedError();
    this.abortUpstream = abort;
  }

  /** Called when the pool is saturated: a request still queued after `ms` is answered 504. */
  waitAtMost(ms: number): void {
    if (this.abortUpstream || this.failed) return;
    this.queueTimer = setTimeout(this.queuedTooLong, ms);
  }

  private readonly queuedTooLong = (): void => {
    if (!this.abortUpstream) this.onError(new errors.HeadersTimeoutError('queued for a connection longer than upstream.timeoutMs'));
  };

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    if (statusCode < 200) {
      // 1xx are not relayed (the gateway answered any Expect itself); a flood of them ends it.
      if (++this.interim > MAX_INTERIM_RESPONSES)
        this.abortUpstream?.(new Error(`more than ${MAX_INTERIM_RESPONSES} interim (1xx) responses`));
      return true;
    }
    const headers = responseHeadersOf(rawHeaders);
    if (AssertionRejections.mayBeRejection(statusCode, headers)) {
      this.held = { status: statusCode, headers, chunks: [] };
      return true;
    }
    this.resumeUpstream = resume;
    this.relayHead(statusCode, headers);
    if (statusCode === 204 || statusCode === 304) {
      // No content whatever its Content-Length says (RFC 9110 §6.4.1; a 304 may carry the length
      // a 200 would have had, §8.6): complete now. undici then still compares that length with
      // the 0 bytes it read and fails the exchange (UND_ERR_RES_CONTENT_LENGTH_MISMATCH).
      this.settled = true;
      this.res.end();
    }
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.held) {
      this.held.chunks.push(chunk);
      return true;
    }
    if (this.res.write(chunk)) return true;
    // The client reads slower than the upstream sends: the upstream waits for it.
    this.res.once('drain', this.resumeUpstream!);
    return false;
  }

  onComplete(): void {
    // Settled before its end only as a 204/304, answered with its head.
    if (this.settled) return;
    this.settled = true;
    const held = this.held;
    if (!held) {
      this.res.end();
      return;
    }
    const body = Buffer.concat(held.chunks);
    if (!AssertionRejections.isRejection(body)) {
      this.relayHead(held.status, held.headers);
      this.res.end(body);
      return;
    }
    const { assertions, metrics, options } = this.shared;
    assertions.record(options.url);
    metrics.upstreamErrors.inc({ kind: 'assertion_rejected' });
    sendError(this.res, 'bad_gateway', 'The upstream refused the gateway’s credentials: a gateway configuration fault, not yours.');
  }

  onError(err: Error): void {
    const { res, shared } = this;
    const { metrics } = shared;
    shared.delivered.add(err);
    if (this.queueTimer) clearTimeout(this.queueTimer);
    if (this.failed) return;
    if (this.mayResend(err)) return this.resend();
    this.failed = true;
    // undici's length check on a 204/304 already relayed in full (the only response settled
    // before undici's end of it): not a fault of the upstream.
    if (this.settled && (err as NodeJS.ErrnoException).code === 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH') return;
    // The client went away first (its close aborted the upstream request): nobody to answer.
    if (this.clientGone || (res.destroyed && !res.headersSent)) return;
    if (this.settled || res.headersSent) {
      // The response is under way: only this exchange ends, counted; the client sees a truncated
      // response, never a corrupted one.
      metrics.exchangeErrors.inc({ side: 'upstream' });
      metrics.upstreamErrors.inc({ kind: res.writableEnded ? 'after_response' : 'aborted_mid_response' });
      if (!res.writableEnded) res.destroy();
      return;
    }
    this.settled = true;
    for (const name of this.copied) res.removeHeader(name);
    if (TIMEOUT_CODES.has((err as NodeJS.ErrnoException).code ?? '')) {
      metrics.upstreamErrors.inc({ kind: 'gateway_timeout' });
      sendError(res, 'gateway_timeout');
      return;
    }
    metrics.upstreamErrors.inc({ kind: 'bad_gateway' });
    shared.logger.warn(
      { err: { code: (err as NodeJS.ErrnoException).code, message: err.message }, reqId: this.req.headers['x-request-id'] },
      'upstream failed',
    );
    sendError(res, 'bad_gateway');
  }

  private mayResend(error: Error): boolean {
    if (this.clientGone || this.res.headersSent || this.settled || this.held) return false;
    return mayResendOnFreshConnection({
      method: this.dispatch.method,
      error,
      responseStarted: this.interim > 0,
      bodyBytesTaken: this.dispatch.body?.takenBytes ?? 0,
      retried: this.resent,
    });
  }

  private resend(): void {
    this.resent = true;
    this.abortUpstream = undefined;
    const { dispatch } = this;
    dispatch.body?.destroy();
    this.dispatch = { ...dispatch, body: dispatch.body && new ClientBody(this.req) };
    this.shared.resend(this.dispatch, this);
  }

  /**
   * The response has ended (or the client left). A request body the upstream did not read to its
   * end — it answered early (413, 401, …) or failed — is read and dropped, bounded, so the
   * client's next request on this connection is reached, not stuck behind it.
   */
  readonly clientClosed = (): void => {
    if (this.res.writableFinished) {
      if (!this.req.complete) {
        this.dispatch.body?.destroy();
        discardRestOfBody(this.req);
      }
      return;
    }
    this.clientGone = true;
    this.abortUpstream?.();
  };

  /** The client broke its request body: the upstream request goes too. */
  readonly clientBroke = (): void => {
    this.shared.metrics.exchangeErrors.inc({ side: 'client' });
    this.clientGone = true;
    this.abortUpstream?.();
  };

  private relayHead(status: number, headers: IncomingHttpHeaders): void {
    this.res.statusCode = status;
    this.copied = copyResponseHeaders(headers, this.res);
  }
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
