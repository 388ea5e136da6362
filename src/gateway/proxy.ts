import { Agent as HttpAgent, type IncomingMessage, type ServerResponse } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { createProxyServer } from 'http-proxy-3';
import { sendError } from '../errors/render.js';
import type { Logger } from '../observability/log.js';
import type { Metrics } from '../observability/metrics.js';

export interface UpstreamOptions {
  url: string;
  timeoutMs: number;
  maxSockets: number;
}

class UpstreamTimeout extends Error {
  readonly code = 'UPSTREAM_TIMEOUT';
}

/**
 * Transport only: forwards a request that passed the policy chain to the upstream over a
 * keep-alive pool and maps failures to Error bodies. Refused or reset → 502 bad_gateway; no answer
 * within `timeoutMs` → 504 gateway_timeout. When the upstream fails after the response started, the
 * client connection is destroyed (a truncated response, never a corrupted one). A client that goes
 * away destroys its upstream request (http-proxy-3 does that on `res` close).
 */
export function createUpstreamProxy(options: UpstreamOptions, logger: Logger, metrics: Metrics) {
  const target = new URL(options.url);
  // Idle pooled sockets are dropped after 60 s, before common upstream keep-alive timeouts (65 s
  // for our backend): reusing a socket the upstream is closing at that instant would be a 502.
  const agentOptions = { keepAlive: true, maxSockets: options.maxSockets, maxFreeSockets: 256, timeout: 60_000, scheduling: 'lifo' as const };
  const agent = target.protocol === 'https:' ? new HttpsAgent(agentOptions) : new HttpAgent(agentOptions);
  const proxy = createProxyServer({ target: options.url, agent, xfwd: true });

  // An idle timeout on the upstream socket: before the response head it becomes a 504; once the
  // body streams, a stall that long ends the response (the agent resets it for pooled sockets).
  proxy.on('proxyReq', (proxyReq) => {
    proxyReq.setTimeout(options.timeoutMs, () => proxyReq.destroy(new UpstreamTimeout('upstream timeout')));
  });

  // http-proxy pipes the upstream body into the client response but ignores a body cut short: the
  // client would wait forever. An upstream response that closes incomplete ends the client's too.
  proxy.on('proxyRes', (proxyRes, _req, res) => {
    proxyRes.once('close', () => {
      if (!proxyRes.complete && !res.destroyed) {
        metrics.upstreamErrors.inc({ kind: 'aborted_mid_response' });
        res.destroy();
      }
    });
  });

  function onError(err: Error, req: IncomingMessage, res: ServerResponse): void {
    const code = (err as NodeJS.ErrnoException).code;
    if (res.headersSent || res.destroyed) {
      metrics.upstreamErrors.inc({ kind: 'aborted_mid_response' });
      res.destroy();
      return;
    }
    if (err instanceof UpstreamTimeout) {
      metrics.upstreamErrors.inc({ kind: 'gateway_timeout' });
      sendError(res, 'gateway_timeout');
    } else {
      metrics.upstreamErrors.inc({ kind: 'bad_gateway' });
      logger.warn({ err: { code, message: err.message }, reqId: req.headers['x-request-id'] }, 'upstream failed');
      sendError(res, 'bad_gateway');
    }
  }

  return {
    forward(req: IncomingMessage, res: ServerResponse): void {
      proxy.web(req, res, {}, (err: Error) => onError(err, req, res));
    },
    close(): void {
      proxy.close();
      agent.destroy();
    },
  };
}

export type UpstreamProxy = ReturnType<typeof createUpstreamProxy>;
