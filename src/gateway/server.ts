import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { sendError } from '../errors/render.js';
import { answerClientErrors } from '../http/client-errors.js';
import type { Logger } from '../observability/log.js';
import { logWhenDone } from './access-log.js';
import { runChain } from './chain.js';
import type { Policy, RequestContext } from './context.js';
import type { UpstreamProxy } from './proxy.js';

export interface GatewayServerParts {
  chain: () => readonly Policy[];
  proxy: UpstreamProxy;
  logger: Logger;
}

/**
 * The request lifecycle: policy chain, then either the rejection as an Error body or the proxy.
 * Faults thrown anywhere in the chain are answered here, once, as 500.
 */
export function createGatewayServer({ chain, proxy, logger }: GatewayServerParts): Server {
  const server = createServer(
    {
      // Bounded header and body waits: a slow client cannot hold a socket forever (slowloris).
      headersTimeout: 10_000,
      requestTimeout: 60_000,
      keepAliveTimeout: 65_000,
      maxHeaderSize: 16 * 1024,
    },
    (req, res) => void handle(req, res),
  );

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const ctx: RequestContext = { req, res, startedAtMs: performance.now(), requestId: '' };
    logWhenDone(ctx, logger);
    try {
      const rejection = await runChain(ctx, chain());
      if (rejection) sendError(res, rejection.code, rejection.message, rejection.headers);
      else proxy.forward(req, res);
    } catch (err) {
      logger.error({ err, reqId: ctx.requestId }, 'request failed in the policy chain');
      sendError(res, 'internal_error');
    }
  }

  answerClientErrors(server);
  return server;
}
