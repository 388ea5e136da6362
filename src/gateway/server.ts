import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Http2SecureServer, Http2ServerRequest } from 'node:http2';
import type { Duplex } from 'node:stream';
import { statusOf } from '../errors/registry.js';
import { sendError } from '../errors/render.js';
import { canonicalTarget } from '../http/canonical-target.js';
import { answerClientErrors } from '../http/client-errors.js';
import type { ConnectionGuard } from '../http/connection-guard.js';
import { h2RequestFraming } from '../http/h2-request.js';
import { requestFraming } from '../http/request-framing.js';
import type { TlsFiles } from '../http/tls-context.js';
import { createTlsListener, type AnyRequest, type AnyResponse } from '../http/tls-listener.js';
import type { Logger } from '../observability/log.js';
import type { Metrics } from '../observability/metrics.js';
import type { Tracing } from '../tracing/tracing.js';
import { observeWhenDone } from './access-log.js';
import { runChain } from './chain.js';
import { isAnswer, type Policy, type RequestContext } from './context.js';
import type { ForwardPlan, UpstreamProxy } from './proxy.js';
import { sendAnswer } from './send-answer.js';
import { isWebSocketHandshake, responseOnUpgradedSocket, type WebSocketTunnels } from './websocket-proxy.js';

export interface GatewayServerParts {
  chain: readonly Policy[];
  /** Labels a canonical path for metrics (route-label.ts). */
  route: (url: string | undefined) => string;
  proxy: UpstreamProxy;
  logger: Logger;
  metrics: Metrics;
  timeouts: { headersTimeoutMs: number; requestTimeoutMs: number };
  /** Closes connections that send no request head in time, and caps them per address (connection-guard.ts). */
  guard?: ConnectionGuard;
  /** Where an admitted WebSocket handshake goes (websocket-proxy.ts); without it, upgrades are served as plain requests. */
  tunnels?: WebSocketTunnels;
  /** HTTPS, and HTTP/2 by ALPN, on this listener (http/tls-listener.ts); absent: plain HTTP/1.1. */
  tls?: TlsFiles;
  /** OpenTelemetry tracing (tracing/tracing-from-env.ts); absent: no span, no trace header, no cost. */
  tracing?: Tracing;
}

/**
 * The request lifecycle: policy chain, then either the rejection as an Error body or the proxy.
 * Faults thrown anywhere in the chain are answered here, once, as 500.
 */
export function createGatewayServer(parts: GatewayServerParts): Server | Http2SecureServer {
  const { chain, route, proxy, logger, metrics, timeouts, guard, tunnels, tls, tracing } = parts;
  // HTTP/2 streams arrive as Http2ServerRequest/Response, which h2-request.ts makes read like
  // IncomingMessage/ServerResponse (headers without pseudo-fields, Host from :authority), and every
  // HTTP/1-only call below is guarded: one handler, typed as HTTP/1.1, serves both.
  const onRequest = (req: AnyRequest, res: AnyResponse) => void handle(req as IncomingMessage, res as ServerResponse);
  const server = tls ? createTlsListener({ files: tls, timeouts, logger }, onRequest).server : plainServer();
  function plainServer(): Server {
    const plain = createServer(
      {
        // Bounded header and body waits: a slow client cannot hold a socket forever (slowloris).
        headersTimeout: timeouts.headersTimeoutMs,
        requestTimeout: timeouts.requestTimeoutMs,
        // Node checks those timeouts on this period (30 s by default, far coarser than them).
        connectionsCheckingInterval: Math.min(1000, timeouts.headersTimeoutMs),
        keepAliveTimeout: 65_000,
        maxHeaderSize: 16 * 1024,
      },
      onRequest,
    );
    // No count limit in Node itself: with one, Node stops collecting fields (in batches) once it
    // holds that many and drops the rest silently, so whether a count over the limit is even seen
    // would depend on how the head was split. Every field is kept instead, request-framing.ts counts
    // them all and refuses more than its MAX_HEADER_FIELDS with 431, and `maxHeaderSize` (16 KiB)
    // bounds what one head can allocate.
    plain.maxHeadersCount = 0;
    return plain;
  }
  // Without this listener Node answers `Expect: 100-continue` with 100 before any policy ran
  // (inviting the body of a request about to be refused); with it, `handle` sends 100 only once
  // the chain has passed (RFC 9110 §10.1.1 lets a proxy answer the expectation itself).
  server.on('checkContinue', onRequest);
  // A request with `Connection: upgrade` is handed over with its socket: a WebSocket handshake goes
  // through the chain to a tunnel, any other upgrade (h2c, …) is served as a plain request; either
  // way the connection carries nothing after it (websocket-proxy.ts).
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const res = responseOnUpgradedSocket(req, socket);
    void handle(req, res, tunnels && isWebSocketHandshake(req) ? head : undefined);
  });
  guard?.attach(server, tls ? 'tls' : 'plain');

  /** `upgradeHead`: a WebSocket handshake, with the bytes the client sent after it. */
  async function handle(req: IncomingMessage, res: ServerResponse, upgradeHead?: Buffer): Promise<void> {
    guard?.spoke(req.socket);
    const ctx: RequestContext = { req, res, startedAtMs: performance.now(), requestId: '' };
    if (tracing) {
      // W3C Trace Context Level 2: the response names the trace and the gateway's span, on
      // answers and Error bodies alike (an upstream's own traceresponse does not replace it).
      ctx.trace = tracing.gatewayRequest(req, tls ? 'https' : 'http');
      res.setHeader('traceresponse', ctx.trace.traceresponse());
    }
    observeWhenDone(ctx, logger, metrics, route);
    const plan = edgeDecision(req, res);
    if (!plan) return;
    try {
      const rejection = await runChain(ctx, chain);
      if (!rejection) {
        if (upgradeHead) return tunnels!.forward(ctx, plan, upgradeHead);
        if (plan.expectsContinue && !ctx.continued) res.writeContinue();
        return proxy.forward(ctx, plan);
      }
      if (isAnswer(rejection)) return sendAnswer(res, rejection);
      ctx.refusal = rejection.code;
      if (statusOf(rejection.code) === 401) metrics.authFailures.inc({ code: rejection.code });
      sendError(res, rejection.code, rejection.message, rejection.headers, rejection.details);
    } catch (err) {
      logger.error({ err, reqId: ctx.requestId }, 'request failed in the policy chain');
      sendError(res, 'internal_error');
    }
  }

  answerClientErrors(server);
  return server;
}

/**
 * What the request is, decided once before any policy: its framing (request-framing.ts) and its
 * canonical target (canonical-target.ts), which replaces `req.url` so that every policy, log line,
 * metric label and the upstream read the same path. Undefined once an Error body was sent.
 */
function edgeDecision(req: IncomingMessage, res: ServerResponse): (ForwardPlan & { expectsContinue: boolean }) | undefined {
  const h2 = req.httpVersionMajor === 2;
  const framing = h2 ? h2RequestFraming(req as unknown as Http2ServerRequest) : requestFraming(req);
  if (!framing.ok) {
    // The rest of the connection cannot be trusted to hold message boundaries: close it after this
    // (HTTP/2 frames each stream itself: only this stream is refused).
    if (!h2) res.shouldKeepAlive = false;
    sendError(res, framing.code, framing.message);
    return undefined;
  }
  const target = canonicalTarget(req.url ?? '');
  if (!target.ok) {
    sendError(res, 'bad_request', `The request target cannot be normalised safely: ${target.reason}.`);
    return undefined;
  }
  req.url = target.target;
  const host = target.authority ?? req.headers.host ?? '';
  if (target.authority !== undefined) req.headers.host = target.authority;
  // RFC 9110 §10.1.1: a 100-continue expectation in an HTTP/1.0 request is ignored.
  const expect = h2 || req.httpVersionMinor >= 1 ? req.headers.expect : undefined;
  return { body: framing.body, host, expectsContinue: typeof expect === 'string' && expect.toLowerCase() === '100-continue' };
}
