import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { statusOf } from '../errors/registry.js';
import { sendError } from '../errors/render.js';
import { answerClientErrors } from '../http/client-errors.js';
import type { Logger } from '../observability/log.js';
import type { Metrics } from '../observability/metrics.js';
import { observeWhenDone } from './access-log.js';
import { runChain } from './chain.js';
import { isAnswer, type Policy, type RequestContext } from './context.js';
import type { UpstreamProxy } from './proxy.js';
import { sendAnswer } from './send-answer.js';
import { routeLabeler } from './route-label.js';

export interface GatewayServerParts {
  chain: readonly Policy[];
  proxy: UpstreamProxy;
  logger: Logger;
  metrics: Metrics;
  timeouts: { headersTimeoutMs: number; requestTimeoutMs: number };
}

/**
 * The request lifecycle: policy chain, then either the rejection as an Error body or the proxy.
 * Faults thrown anywhere in the chain are answered here, once, as 500.
 */
export function createGatewayServer({ chain, proxy, logger, metrics, timeouts }: GatewayServerParts): Server {
  const route = routeLabeler();
  const server = createServer(
    {
      // Bounded header and body waits: a slow client cannot hold a socket forever (slowloris).
      headersTimeout: timeouts.headersTimeoutMs,
      requestTimeout: timeouts.requestTimeoutMs,
      // Node checks those timeouts on this period (30 s by default, far coarser than them).
      connectionsCheckingInterval: Math.min(1000, timeouts.headersTimeoutMs),
      keepAliveTimeout: 65_000,
      maxHeaderSize: 16 * 1024,
    },
    (req, res) => void handle(req, res),
  );

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const ctx: RequestContext = { req, res, startedAtMs: performance.now(), requestId: '' };
    observeWhenDone(ctx, logger, metrics, route);
    try {
      const rejection = await runChain(ctx, chain);
      if (!rejection) return proxy.forward(req, res);
      if (isAnswer(rejection)) return sendAnswer(res, rejection);
      if (statusOf(rejection.code) === 401) metrics.authFailures.inc({ code: rejection.code });
      sendError(res, rejection.code, rejection.message, rejection.headers);
    } catch (err) {
      logger.error({ err, reqId: ctx.requestId }, 'request failed in the policy chain');
      sendError(res, 'internal_error');
    }
  }

  answerClientErrors(server);
  return server;
}
