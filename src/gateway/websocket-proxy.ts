import { ServerResponse, type IncomingMessage } from 'node:http';
import type { ProxyTrust } from '../http/proxy-trust.js';
import type { Duplex } from 'node:stream';
import { Gauge, type Registry } from 'prom-client';
import type { Dispatcher } from 'undici';
import { sendError } from '../errors/render.js';
import { connectionOptions } from '../http/connection-options.js';
import { forwardedValues } from '../http/forwarded-headers.js';
import type { Logger } from '../observability/log.js';
import type { Upstreams } from '../upstream/upstreams.js';
import { answerInternalError } from './answer-fault.js';
import type { RequestContext } from './context.js';
import type { ForwardPlan } from './proxy.js';
import { responseHeadersOf } from './upstream-response-fields.js';
import { copyResponseHeaders } from './upstream-response-headers.js';
import { closeFrame } from './websocket-frames.js';
import { FrameRelay } from './websocket-relay.js';

/** Longest a timer runs in Node (a longer delay fires at once): later deadlines are reached in steps. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** How long the two ends get, once the tunnel's credential expired, to finish a frame and close. */
const CLOSE_GRACE_MS = 5000;
/** RFC 6455 §7.4.1: 1008, the endpoint received a message that violates its policy. */
const POLICY_VIOLATION = 1008;
/** The Close reason when the credential the tunnel was opened with expires, by its kind. */
const EXPIRED_REASON = { token: 'The access token expired.', key: 'The API key expired.' } as const;

/**
 * True for a WebSocket opening handshake (RFC 6455 §4.1): an HTTP/1.1 GET whose `Connection` lists
 * `upgrade` and whose `Upgrade` lists `websocket`. Any other upgrade (`h2c`, …) is ignored: the
 * request is served as a plain one and its connection closed after the answer (RFC 9110 §7.8 lets
 * a server ignore Upgrade). Without `Connection: upgrade`, Node hands the request over as a plain
 * one and it is proxied as such: it must not pass for a handshake, or a WebSocket ticket would
 * authenticate an ordinary request (authenticate-ws-ticket.ts).
 */
export function isWebSocketHandshake(req: IncomingMessage): boolean {
  const upgrade = req.headers.upgrade;
  if (req.method !== 'GET' || req.httpVersion !== '1.1' || typeof upgrade !== 'string') return false;
  if (!connectionOptions(req.headers.connection)?.includes('upgrade')) return false;
  return upgrade
    .toLowerCase()
    .split(',')
    .some((token) => token.trim() === 'websocket');
}

/**
 * A ServerResponse for a request Node handed over as an upgrade (server 'upgrade' event): the
 * policies, error bodies and the access log work on it as on any response. The connection never
 * carries another request (Node no longer parses it): whatever the answer, it is the last one,
 * and the socket is closed after it, so nothing pipelined behind the request waits forever.
 */
export function responseOnUpgradedSocket(req: IncomingMessage, socket: Duplex): ServerResponse {
  const res = new ServerResponse(req);
  res.shouldKeepAlive = false;
  res.assignSocket(socket as never);
  res.once('finish', () => {
    if (res.statusCode !== 101) socket.end();
  });
  socket.on('error', () => socket.destroy());
  return res;
}

export interface WebSocketOptions {
  /** A tunnel with no byte in either direction for this long is closed. */
  idleTimeoutMs: number;
}

interface Tunnel {
  client: Duplex;
  upstream?: Duplex;
  keyId?: string;
  /** When the credential that opened it stops being valid (a JWT's exp, a key's expiresAt): the tunnel closes then. */
  validUntilMs?: number;
  /** The Close reason sent then. */
  expiredReason: string;
  /** Once established: moves the close to a key's new expiry (none: `undefined`), unless it is under way. */
  rearm?: (atMs: number | undefined) => void;
}

/**
 * WebSocket proxying. The opening handshake is a request like any other: it passed the whole
 * policy chain (authenticated, counted once against the quota) before it reaches `open`. It is
 * sent to a target of the service its path routes to, with the same header rules as any proxied
 * request; a 101 from the target is relayed and both sockets are then piped to each other byte for
 * byte (frames, extensions and close handshakes are the two ends' business). Any other answer of
 * the target is relayed as it is, and the connection closed. A tunnel ends when either side
 * closes, after `idleTimeoutMs` without a byte either way, when the key it was opened with is
 * revoked, or when the gateway shuts down (both sockets cut), and when the access token or API key
 * it was opened with expires (a key's expiry as it stands, moved or removed since the tunnel
 * opened): then the gateway speaks once, a Close 1008 to each end at a frame boundary of its
 * direction, so a browser sees a close with a reason rather than a dropped connection.
 */
export class WebSocketTunnels {
  private readonly open = new Set<Tunnel>();
  private readonly gauge: Gauge;

  constructor(
    private readonly upstreams: Upstreams,
    private readonly proxyTrust: ProxyTrust,
    private readonly options: WebSocketOptions,
    private readonly logger: Logger,
    registry: Registry,
  ) {
    this.gauge = new Gauge({
      name: 'tollgate_websocket_tunnels',
      help: 'WebSocket connections open through the gateway',
      registers: [registry],
    });
  }

  /** Forwards the handshake of `ctx` (the policy chain has passed) and, on a 101, opens the tunnel. */
  forward(ctx: RequestContext, plan: ForwardPlan, head: Buffer): void {
    const { req, res } = ctx;
    const client = req.socket as Duplex;
    if (client.destroyed) return;
    // RFC 6455 §4.1: the handshake is a GET without content; a body would be read as frames.
    if (plan.body.kind === 'chunked' || (plan.body.kind === 'length' && plan.body.bytes > 0)) {
      sendError(res, 'bad_request', 'A WebSocket handshake carries no body.');
      return;
    }
    const route = ctx.route ?? this.upstreams.route(req.url ?? '/');
    const choice = route.service.choose(new Set());
    if ('unavailable' in choice) {
      sendError(res, 'upstream_unavailable', undefined, { 'retry-after': choice.retryAfterSeconds });
      return;
    }
    const target = choice.target;
    ctx.upstream = { service: route.service.name, target: target.url, tries: 1 };
    const headers = req.headers;
    const host = plan.host || new URL(target.url).host;
    Object.assign(headers, forwardedValues(req, this.proxyTrust, host));
    headers.host = host;
    const credential = ctx.credential;
    const tunnel: Tunnel = {
      client,
      keyId: ctx.consumer?.id,
      validUntilMs: credential?.validUntilMs,
      expiredReason: EXPIRED_REASON[credential?.kind ?? 'token'],
    };
    const handler = new Handshake(this, tunnel, ctx, head, this.logger);
    target.pool.dispatch(
      {
        method: 'GET',
        path: target.basePath + route.path,
        headers: headers as Record<string, string>,
        // undici writes `Connection: upgrade` and `Upgrade: websocket` itself.
        upgrade: 'websocket',
        headersTimeout: route.service.config.timeoutMs,
      },
      handler,
    );
  }

  /** Both sockets are live: relayed to each other until either ends, the tunnel idles out, or its credential expires. */
  established(tunnel: Tunnel, upstream: Duplex, head: Buffer): void {
    const { client } = tunnel;
    tunnel.upstream = upstream;
    this.open.add(tunnel);
    this.gauge.inc();
    const up = new FrameRelay(client, upstream, head);
    const down = new FrameRelay(upstream, client);
    let ended = false;
    let expiring = false;
    let timer: NodeJS.Timeout | undefined;
    const end = () => {
      if (ended) return;
      ended = true;
      clearTimeout(timer);
      this.open.delete(tunnel);
      this.gauge.dec();
      client.destroy();
      upstream.destroy();
    };
    // RFC 6455 §7.1.1: the server closes the TCP connection after the Close handshake. Towards the
    // client the gateway is the server: Close, then its end of the connection. Towards the
    // upstream it is the client: Close, then wait for the upstream to end it. Once the client has
    // its Close, the upstream going away no longer cuts the client short.
    const expire = () => {
      expiring = true;
      // First: whatever happens below, the tunnel ends within the grace.
      timer = setTimeout(end, CLOSE_GRACE_MS);
      const reason = tunnel.expiredReason;
      down.stopAtBoundary(() => client.end(closeFrame(POLICY_VIOLATION, reason, false)));
      up.stopAtBoundary(() => upstream.write(closeFrame(POLICY_VIOLATION, reason, true)));
    };
    const arm = (atMs: number) => {
      const ms = atMs - Date.now();
      timer = ms > MAX_TIMER_MS ? setTimeout(() => arm(atMs), MAX_TIMER_MS) : setTimeout(expire, Math.max(0, ms));
    };
    const upstreamGone = () => (down.stopped ? upstream.destroy() : end());
    for (const [side, gone] of [
      [client, end],
      [upstream, upstreamGone],
    ] as const) {
      side.on('error', gone);
      side.on('close', gone);
      // A half-close ends the tunnel: WebSocket has its own close handshake in frames.
      side.on('end', gone);
    }
    // Every byte either way passes through the client socket (read from it or written to it), so
    // its inactivity timeout is the tunnel's.
    (client as Duplex & { setTimeout(ms: number, cb: () => void): void }).setTimeout(this.options.idleTimeoutMs, end);
    if (tunnel.validUntilMs !== undefined) arm(tunnel.validUntilMs);
    tunnel.rearm = (atMs) => {
      if (ended || expiring) return;
      clearTimeout(timer);
      tunnel.validUntilMs = atMs;
      if (atMs !== undefined) arm(atMs);
    };
    if (client.destroyed || upstream.destroyed) end();
  }

  /** Closes the tunnels opened with `keyId` (the key was revoked or expired). */
  closeKey(keyId: string): number {
    let closed = 0;
    for (const tunnel of this.open) {
      if (tunnel.keyId !== keyId) continue;
      tunnel.client.destroy();
      tunnel.upstream?.destroy();
      closed++;
    }
    return closed;
  }

  /** The key `keyId` is still valid, now until `validUntilMs` (none: `undefined`): its tunnels close then. */
  keyExpiryChanged(keyId: string, validUntilMs: number | undefined): void {
    for (const tunnel of this.open) if (tunnel.keyId === keyId) tunnel.rearm?.(validUntilMs);
  }

  /** Some tunnel was opened with `keyId` (worth re-reading the key after a change). */
  hasKey(keyId: string): boolean {
    for (const tunnel of this.open) if (tunnel.keyId === keyId) return true;
    return false;
  }

  /** Shutdown: every tunnel is cut. */
  close(): void {
    for (const tunnel of this.open) {
      tunnel.client.destroy();
      tunnel.upstream?.destroy();
    }
  }
}

/**
 * undici's dispatch handler for one handshake: `onUpgrade` on a 101; otherwise the target's answer
 * (a 401, 404, …) is relayed as a normal response and ends the connection.
 */
class Handshake implements Dispatcher.DispatchHandler {
  private abort?: (err?: Error) => void;
  /** A fault of ours was answered: nothing more of the target's answer is relayed. */
  private failed = false;

  constructor(
    private readonly tunnels: WebSocketTunnels,
    private readonly tunnel: Tunnel,
    private readonly ctx: RequestContext,
    private readonly head: Buffer,
    private readonly logger: Logger,
  ) {
    // The client left during the handshake: the upstream side goes too.
    tunnel.client.once('close', () => this.abort?.());
  }

  onConnect(abort: (err?: Error) => void): void {
    this.abort = abort;
  }

  onUpgrade(statusCode: number, rawHeaders: Buffer[] | string[] | null, socket: Duplex): void {
    if (this.tunnel.client.destroyed) {
      socket.destroy();
      return;
    }
    try {
      this.relayUpgrade(statusCode, rawHeaders, socket);
    } catch (err) {
      // A fault of ours, not the target's (undici would call it a broken connection: a 502).
      socket.destroy();
      this.ourFault(err);
    }
  }

  private ourFault(err: unknown): void {
    this.logger.error(
      { err, reqId: this.ctx.req.headers['x-request-id'] },
      'websocket handshake relay failed: answered 500 internal_error',
    );
    answerInternalError(this.ctx.req, this.ctx.res);
  }

  private relayUpgrade(statusCode: number, rawHeaders: Buffer[] | string[] | null, socket: Duplex): void {
    const { res } = this.ctx;
    const headers = responseHeadersOf((rawHeaders ?? []) as Buffer[]);
    copyResponseHeaders(headers, res, this.ctx.corsApplies);
    const ticketEntry = this.ctx.ticketSubprotocol;
    if (ticketEntry !== undefined && !res.hasHeader('sec-websocket-protocol')) res.setHeader('sec-websocket-protocol', ticketEntry);
    res.setHeader('connection', 'Upgrade');
    res.setHeader('upgrade', 'websocket');
    res.writeHead(statusCode);
    // The 101 head only: no body, and the socket stays open (responseOnUpgradedSocket).
    res.end();
    this.tunnels.established(this.tunnel, socket, this.head);
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], _resume: () => void): boolean {
    if (statusCode < 200) return true;
    const { res } = this.ctx;
    try {
      res.statusCode = statusCode;
      copyResponseHeaders(responseHeadersOf(rawHeaders), res, this.ctx.corsApplies);
    } catch (err) {
      this.failed = true;
      this.abort?.();
      this.ourFault(err);
    }
    return true;
  }

  onData(chunk: Buffer): boolean {
    // A refusal's body: small, and the connection ends with it; no backpressure needed.
    if (!this.failed) this.contained(() => this.ctx.res.write(chunk));
    return true;
  }

  onComplete(): void {
    if (!this.failed) this.contained(() => this.ctx.res.end());
  }

  /**
   * Our code inside undici's callbacks: a throw is ours (answered 500, or the connection cut), never
   * the target's; from onError, undici would only re-emit it and the client would wait for ever.
   */
  private contained(relay: () => unknown): void {
    try {
      relay();
    } catch (err) {
      this.failed = true;
      this.abort?.();
      this.ourFault(err);
    }
  }

  onError(err: Error): void {
    if (!this.failed) this.contained(() => this.answerError(err));
  }

  private answerError(err: Error): void {
    const { res, req } = this.ctx;
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const code = (err as NodeJS.ErrnoException).code;
    this.logger.warn(
      { err: { code, message: err.message }, reqId: req.headers['x-request-id'], target: this.ctx.upstream?.target },
      'websocket handshake failed upstream',
    );
    if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT') sendError(res, 'gateway_timeout');
    else sendError(res, 'bad_gateway');
  }
}
