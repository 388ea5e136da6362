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
import { answerFault } from './answer-fault.js';
import { sendAnswer } from './send-answer.js';
import type { TestFaults } from './test-faults.js';
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
  /** Test-only fault injection (test-faults.ts); absent in production: nothing is wrapped. */
  faults?: TestFaults;
}

/**
 * The request lifecycle: the edge decision, the policy chain, then either the rejection as an
 * Error body or the proxy. A fault thrown anywhere from the first line of `handle` to the hand-over
 * to the proxy or the tunnel (and inside their exchanges: proxy.ts) is answered once, as a 500
 * `internal_error` and a closed HTTP/1.1 connection, or with a cut response when one had already
 * started (answer-fault.ts): never a hang, never two answers.
 */
export function createGatewayServer(parts: GatewayServerParts): Server | Http2SecureServer {
  const { route, proxy, logger, metrics, timeouts, guard, tunnels, tls, tracing, faults } = parts;
  // Armed only under test (test-faults.ts): each stage is then wrapped to throw on request.
  const chain = faults ? faults.chain(parts.chain) : parts.chain;
  const decideEdge = faults ? faults.wrap('edge', edgeDecision, (req) => req) : edgeDecision;
  const forward = faults ? faults.wrap('forward', armedAfterHandOver(faults, proxy.forward), (ctx) => ctx.req) : proxy.forward;
  const tunnel =
    tunnels && faults
      ? faults.wrap('tunnel', armedAfterHandOver(faults, tunnels.forward.bind(tunnels)), (ctx) => ctx.req)
      : tunnels?.forward.bind(tunnels);
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
    const ctx: RequestContext = { req, res, startedAtMs: performance.now(), requestId: '' };
    try {
      guard?.spoke(req.socket);
      if (tracing) {
        // W3C Trace Context Level 2: the response names the trace and the gateway's span, on
        // answers and Error bodies alike (an upstream's own traceresponse does not replace it).
        ctx.trace = tracing.gatewayRequest(req, tls ? 'https' : 'http');
        res.setHeader('traceresponse', ctx.trace.traceresponse());
      }
      observeWhenDone(ctx, logger, metrics, route);
      const plan = decideEdge(req, res);
      if (!plan) return;
      // Awaited only when some policy returned a promise (chain.ts): else forwarded in this turn.
      const decided = runChain(ctx, chain);
      const rejection = decided instanceof Promise ? await decided : decided;
      if (!rejection) {
        if (upgradeHead) return tunnel!(ctx, plan, upgradeHead);
        if (plan.expectsContinue && !ctx.continued) res.writeContinue();
        return forward(ctx, plan);
      }
      if (isAnswer(rejection)) return sendAnswer(res, rejection);
      ctx.refusal = rejection.code;
      if (statusOf(rejection.code) === 401) metrics.authFailures.inc({ code: rejection.code });
      sendError(res, rejection.code, rejection.message, rejection.headers, rejection.details);
    } catch (err) {
      answerFault(ctx, err, logger);
    }
  }

  answerClientErrors(server);
  return server;
}

/** Under test only: the stages after the hand-over armed on the response before the proxy or tunnel takes it (test-faults.ts). */
function armedAfterHandOver<A extends unknown[]>(faults: TestFaults, forward: (ctx: RequestContext, ...rest: A) => void) {
  return (ctx: RequestContext, ...rest: A): void => {
    faults.armResponse(ctx.req, ctx.res);
    forward(ctx, ...rest);
  };
}

/**
 * What the request is, decided once before any policy: its framing (request-framing.ts) and its
 * canonical target (canonical-target.ts), which replaces `req.url` so that every policy, log line,
 * metric label and the upstream read the same path. Undefined once an Error body was sent.
 */
function edgeDecision(req: IncomingMessage, res: ServerResponse): (ForwardPlan & { expectsContinue: boolean }) | undefined {
  // An HTTP/2 stream by the transport it came on, never by the version its request line claims:
  // llhttp accepts `HTTP/2.0` (and `HTTP/0.9`) in an HTTP/1 request line.
  const h2 = 'stream' in req;
  if (!h2 && req.httpVersionMajor !== 1) {
    // RFC 9110 §15.6.6; the connection cannot be trusted to speak HTTP/1.1 after it.
    res.shouldKeepAlive = false;
    sendError(res, 'http_version_not_supported');
    return undefined;
  }
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
