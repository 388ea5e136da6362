import http, { type IncomingMessage } from 'node:http';
import type { Settings } from '../config/settings.js';
import type { ErrorCode } from '../errors/registry.js';
import { answerClientErrors } from '../http/client-errors.js';
import { Drain } from '../http/drain.js';
import { closeGracefully, listen } from '../http/listen.js';
import type { Logger } from '../observability/log.js';
import type { RedisTarget } from '../config/redis-target.js';
import { openCategoryStore } from './open-category-store.js';
import { createRequestHandler } from './request-handler.js';
import { tracingFromEnv } from '../tracing/tracing-from-env.js';

export interface BackendOptions {
  settings: Settings;
  logger: Logger;
  /** Redis for categories (they survive restarts): a URL, or Cluster/Sentinel nodes; unset or empty → memory. */
  redisUrl?: string | RedisTarget;
  /** Refuses a request with an error code (the gateway assertion check); default: accept all. */
  verifyRequest?: (req: IncomingMessage) => Promise<ErrorCode | null>;
}

export interface RunningBackend {
  /** Base URL to reach it, e.g. http://127.0.0.1:8081 (the /v1 paths hang below it). */
  url: string;
  server: http.Server;
  /** Stops accepting, lets in-flight requests finish (bounded by the grace period), closes Redis. */
  close(): Promise<void>;
}

// Idle keep-alive sockets are kept longer than an upstream agent should keep its idle sockets, so
// the gateway (the client) is the side that closes them. If the server closed first, the gateway
// could send a request on a socket just as it closes and get a reset (a 502 for the caller).
const KEEP_ALIVE_TIMEOUT_MS = 65_000;

/** The category service described in openapi.yaml, on plain node:http. */
export async function startBackend(opts: BackendOptions): Promise<RunningBackend> {
  const { settings, logger } = opts;
  const store = await openCategoryStore(opts.redisUrl, settings.redis.commandTimeoutMs, logger);
  const tracing = await tracingFromEnv(process.env, { defaultServiceName: 'tollgate-backend', logger });
  const server = http.createServer(
    createRequestHandler({ store, logger, maxBodyBytes: settings.backend.maxBodyBytes, tracing }, opts.verifyRequest),
  );
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  // As the gateway's: keeps serving while the Service stops sending here (gateway.drainDelaySeconds).
  const drain = new Drain(settings.gateway.drainDelaySeconds * 1000);
  drain.attach(server);
  answerClientErrors(server);
  let url: string;
  try {
    url = await listen(server, settings.backend.host, settings.backend.port);
  } catch (err) {
    await store.close();
    throw err;
  }
  logger.info({ url }, 'backend listening');

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      await drain.begin();
      // The process's shutdown grace (gateway.shutdownGraceSeconds) bounds in-flight requests here too.
      await closeGracefully(server, settings.gateway.shutdownGraceSeconds * 1000);
      await store.close();
      await tracing?.shutdown();
    })());
  return { url, server, close };
}
