import { Client, Pool } from 'undici';
import { tlsConnectOptions, type UpstreamTls } from './upstream-tls.js';

export interface PoolOptions {
  timeoutMs: number;
  maxSockets: number;
  /** For an https:// origin (upstream-tls.ts). */
  tls?: UpstreamTls;
}

/**
 * How long an idle pooled connection is kept, the rule for every upstream people run:
 * - a server that announces `Keep-Alive: timeout=N` (Node's http and Express: 5 s; Fastify: 72 s;
 *   Apache: 5 s) is reused for N s less KEEP_ALIVE_MARGIN_MS, so a connection is dropped by the
 *   gateway a second before the server would close it, never just as it is reused. The margin
 *   must stay well under the shortest timeout servers announce: at 5 s (the old value) Node's 5 s
 *   default left 0, and undici then closed the connection after every response — one new TCP
 *   connection per request in front of the most common upstream;
 * - a server that announces nothing (nginx, Python, most proxies) is reused for
 *   IDLE_WITHOUT_ANNOUNCEMENT_MS: nginx's `keepalive_timeout` defaults to 75 s, but a shorter one
 *   is common and unannounced, and the stale-connection retry (retry-policy.ts) covers
 *   a connection such a server closed first;
 * - a server that closes (HTTP/1.0 without keep-alive, `Connection: close`) is not reused;
 * - never longer than KEEP_ALIVE_MAX_MS, whatever is announced.
 */
export const KEEP_ALIVE_MARGIN_MS = 1_000;
const IDLE_WITHOUT_ANNOUNCEMENT_MS = 4_000;
const KEEP_ALIVE_MAX_MS = 60_000;

function clientOptions(origin: string, options: PoolOptions) {
  return {
    connect: tlsConnectOptions(origin, options.tls),
    // One request at a time per connection: a pipelined upstream answer can never be misattributed.
    pipelining: 1,
    headersTimeout: options.timeoutMs,
    bodyTimeout: options.timeoutMs,
    connectTimeout: options.timeoutMs,
    keepAliveTimeout: IDLE_WITHOUT_ANNOUNCEMENT_MS,
    keepAliveTimeoutThreshold: KEEP_ALIVE_MARGIN_MS,
    keepAliveMaxTimeout: KEEP_ALIVE_MAX_MS,
  };
}

/** The keep-alive pool of one upstream origin. */
export function connectionPool(origin: string, options: PoolOptions): Pool {
  return new Pool(origin, { ...clientOptions(origin, options), connections: options.maxSockets });
}

/**
 * One new connection for one request, closed once it is answered: where a request must not meet
 * another pooled connection that may have gone stale the same way (retry-policy.ts).
 */
export function freshConnection(origin: string, options: PoolOptions): Client {
  return new Client(origin, clientOptions(origin, options));
}
