import {
  Agent as HttpAgent,
  request as httpRequest,
  type ClientRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { sendError } from '../errors/render.js';
import { forwardedValues } from '../http/forwarded-headers.js';
import type { BodyFraming } from '../http/request-framing.js';
import type { Logger } from '../observability/log.js';
import type { Metrics } from '../observability/metrics.js';
import { AssertionRejections } from './assertion-rejections.js';
import { copyResponseHeaders } from './upstream-response-headers.js';

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

class UpstreamTimeout extends Error {
  readonly code = 'UPSTREAM_TIMEOUT';
}

/** Methods Node sends without body framing when no body is given (its useChunkedEncodingByDefault). */
const WITHOUT_DEFAULT_BODY = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT']);

/** More interim (1xx) responses than this before the final one is an upstream flooding us. */
const MAX_INTERIM_RESPONSES = 8;

/**
 * Transport only, on `node:http` (not http-proxy: its passes rewrite framing — `content-length: 0`
 * on DELETE/OPTIONS while still streaming the body —, copy the upstream's `Connection` to the
 * client and write an error after a response has ended; see docs/security.md). Forwards a request
 * that passed the policy chain over a keep-alive pool:
 * - the body is framed by the gateway: exactly what the parser delimited, with the length or
 *   chunking the edge chose, never an unframed stream;
 * - refused or reset before the response → 502 bad_gateway; no response head within `timeoutMs`
 *   (or a body idle that long) → 504 gateway_timeout;
 * - any error once the response has started destroys this one exchange and is counted; nothing
 *   is ever written to a response that has ended.
 */
export function createUpstreamProxy(options: UpstreamOptions, trustedProxyHops: number, logger: Logger, metrics: Metrics) {
  const target = new URL(options.url);
  const secure = target.protocol === 'https:';
  // Idle pooled sockets are dropped after 60 s, before common upstream keep-alive timeouts (65 s
  // for our backend): reusing a socket the upstream is closing at that instant would be a 502.
  const agentOptions = {
    keepAlive: true,
    maxSockets: options.maxSockets,
    maxFreeSockets: 256,
    timeout: 60_000,
    scheduling: 'lifo' as const,
  };
  const agent = secure ? new HttpsAgent(agentOptions) : new HttpAgent(agentOptions);
  const send = secure ? httpsRequest : httpRequest;
  const basePath = target.pathname === '/' ? '' : target.pathname.replace(/\/$/, '');
  const hostname = target.hostname.replace(/^\[|\]$/g, '');
  const assertions = new AssertionRejections(logger, metrics);

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
    if (plan.body.kind === 'length') headers['content-length'] = String(plan.body.bytes);
    else if (plan.body.kind === 'chunked') headers['transfer-encoding'] = 'chunked';
    // No body: Node would frame a POST-like request it is handed as a list as chunked (it writes
    // the head before it knows the body is empty); an empty one is said as such, as before.
    else if (!WITHOUT_DEFAULT_BODY.has(req.method ?? '')) headers['content-length'] = '0';

    const upstreamReq = send({
      agent,
      protocol: target.protocol,
      hostname,
      port: target.port,
      method: req.method,
      path: basePath + (req.url ?? '/'),
      headers: fieldList(headers),
    });
    /** The final response has been settled (relayed to its end, or answered as an error). */
    let done = false;
    /** The upstream's final response head arrived. */
    let responded = false;
    let interim = 0;
    /** Upstream headers already set on `res` (unsent): an error answer must not carry them. */
    let copied: string[] = [];
    const headTimer = setTimeout(() => upstreamReq.destroy(new UpstreamTimeout('upstream timeout')), options.timeoutMs);

    let failed = false;
    let upstreamResponse: IncomingMessage | undefined;
    function fail(err: Error): void {
      clearTimeout(headTimer);
      if (failed) return;
      failed = true;
      if (upstreamResponse?.complete) {
        // The whole response arrived and the upstream then sent bytes that frame nothing (Node
        // drops that socket): the client still gets the complete answer; the fault is counted.
        metrics.exchangeErrors.inc({ side: 'upstream' });
        metrics.upstreamErrors.inc({ kind: 'after_response' });
        return;
      }
      upstreamReq.destroy();
      // The client went away first (its close destroyed the upstream request): nobody to answer.
      if (res.destroyed && !res.headersSent) return;
      if (done || res.headersSent) {
        // The response is under way, or complete and the upstream sent bytes past its end: only
        // this exchange ends, counted; the client sees a truncated response, never a corrupted one.
        metrics.exchangeErrors.inc({ side: 'upstream' });
        metrics.upstreamErrors.inc({ kind: res.writableEnded ? 'after_response' : 'aborted_mid_response' });
        if (!res.writableEnded) res.destroy();
        return;
      }
      done = true;
      for (const name of copied) res.removeHeader(name);
      if (err instanceof UpstreamTimeout) {
        metrics.upstreamErrors.inc({ kind: 'gateway_timeout' });
        sendError(res, 'gateway_timeout');
      } else {
        metrics.upstreamErrors.inc({ kind: 'bad_gateway' });
        logger.warn(
          { err: { code: (err as NodeJS.ErrnoException).code, message: err.message }, reqId: req.headers['x-request-id'] },
          'upstream failed',
        );
        sendError(res, 'bad_gateway');
      }
    }

    upstreamReq.on('error', fail);
    // An unrequested 101 (we never send Upgrade): Node would drop the socket without an error.
    upstreamReq.on('upgrade', (_res, socket) => {
      socket.destroy();
      fail(new Error('unrequested protocol upgrade'));
    });
    // Whatever else ends the upstream request without a response ends the exchange too, never a hang.
    upstreamReq.on('close', () => {
      if (!responded) fail(new Error('upstream closed without a response'));
    });
    upstreamReq.on('information', () => {
      if (++interim > MAX_INTERIM_RESPONSES) fail(new Error(`more than ${MAX_INTERIM_RESPONSES} interim (1xx) responses`));
    });
    // An idle socket for `timeoutMs` (a stalled body either way) ends the exchange as well.
    upstreamReq.setTimeout(options.timeoutMs, () => upstreamReq.destroy(new UpstreamTimeout('upstream idle')));
    upstreamReq.on('response', (upstreamRes) => {
      responded = true;
      upstreamResponse = upstreamRes;
      clearTimeout(headTimer);
      if (done) return upstreamRes.destroy();
      upstreamRes.on('error', fail);
      // A body cut short ends the client's response too, or the client would wait forever.
      upstreamRes.once('close', () => {
        if (!upstreamRes.complete) fail(new Error('upstream response closed before its end'));
      });
      if (AssertionRejections.mayBeRejection(upstreamRes)) return inspectUnauthorized(upstreamRes);
      relay(upstreamRes);
    });

    function relay(upstreamRes: IncomingMessage, body?: Buffer): void {
      res.statusCode = upstreamRes.statusCode ?? 502;
      copied = copyResponseHeaders(upstreamRes, res);
      if (body) {
        done = true;
        res.end(body);
        return;
      }
      upstreamRes.on('end', () => (done = true));
      upstreamRes.pipe(res);
    }

    function inspectUnauthorized(upstreamRes: IncomingMessage): void {
      const chunks: Buffer[] = [];
      upstreamRes.on('data', (chunk: Buffer) => chunks.push(chunk));
      upstreamRes.on('end', () => {
        const body = Buffer.concat(chunks);
        if (!AssertionRejections.isRejection(body)) return relay(upstreamRes, body);
        done = true;
        assertions.record(options.url);
        metrics.upstreamErrors.inc({ kind: 'assertion_rejected' });
        sendError(res, 'bad_gateway', 'The upstream refused the gateway’s credentials: a gateway configuration fault, not yours.');
      });
    }

    // The client went away (or broke its request body): the upstream request goes too.
    req.on('error', () => {
      metrics.exchangeErrors.inc({ side: 'client' });
      upstreamReq.destroy();
    });
    res.on('close', () => {
      if (!res.writableFinished) upstreamReq.destroy();
    });
    sendBody(req, upstreamReq, plan.body);
  }

  return {
    forward,
    /** For /readyz: the upstream accepts the gateway's assertion (no rejection lately). */
    assertionAccepted: () => assertions.accepted(),
    close(): void {
      agent.destroy();
    },
  };
}

/**
 * The headers as a flat name/value list, the form in which Node writes them straight into the
 * request head (still validating every name and value) instead of storing each through
 * `setHeader` first: the same bytes with less work per field. Node adds no Host of its own to a
 * list; ours is in it.
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

/** A request without a body is ended at once: no client byte is ever streamed unframed. */
function sendBody(req: IncomingMessage, upstreamReq: ClientRequest, body: BodyFraming): void {
  if (body.kind === 'none' || (body.kind === 'length' && body.bytes === 0)) {
    req.resume();
    upstreamReq.end();
    return;
  }
  req.pipe(upstreamReq);
}

export type UpstreamProxy = ReturnType<typeof createUpstreamProxy>;
