import { Redis, type RedisOptions } from 'ioredis';
import type { Logger } from '../../observability/log.js';

export type RedisRole = 'gateway' | 'cli';

/**
 * One place that decides how we talk to Redis.
 * - gateway: fail fast. Commands time out after `commandTimeoutMs`, nothing queues while
 *   disconnected (a request must not wait for a reconnect), and reconnects go on forever with a
 *   capped backoff so recovery is automatic.
 * - cli: one short attempt, then a clear error (an operator is waiting at a prompt).
 */
export function connectRedis(url: string, role: RedisRole, commandTimeoutMs = 250): Redis {
  const common: RedisOptions = {
    lazyConnect: false,
    connectionName: `tollgate-${role}`,
    // Concurrent commands from many requests share one write: fewer syscalls, same round trips.
    enableAutoPipelining: true,
  };
  const options: RedisOptions =
    role === 'gateway'
      ? {
          ...common,
          commandTimeout: commandTimeoutMs,
          connectTimeout: Math.max(1000, commandTimeoutMs * 4),
          enableOfflineQueue: false,
          maxRetriesPerRequest: 0,
          retryStrategy: (attempt) => Math.min(50 * 2 ** attempt, 1000),
        }
      : {
          ...common,
          connectTimeout: 2000,
          commandTimeout: 5000,
          maxRetriesPerRequest: 0,
          retryStrategy: () => null,
        };
  return new Redis(url, options);
}

/**
 * Resolves when the client is ready; rejects on timeout, or at the first error when `failFast`
 * (the CLI: one attempt, then a clear message).
 */
export function whenReady(redis: Redis, timeoutMs: number, failFast = false): Promise<void> {
  if (redis.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => finish(lastError ?? new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    const onReady = () => finish();
    let lastError: Error | undefined;
    const onError = (err: Error) => (failFast ? finish(err) : (lastError = err));
    const onEnd = () => finish(lastError ?? new Error('connection closed'));
    function finish(err?: Error) {
      clearTimeout(timer);
      redis.off('ready', onReady).off('error', onError).off('end', onEnd);
      if (err) reject(err);
      else resolve();
    }
    redis.once('ready', onReady).on('error', onError).once('end', onEnd);
  });
}

/** The URL with any password masked, for logs and messages. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(unparseable Redis URL)';
  }
}

/** Logs each transition of the connection once (not every failed command, not every retry). */
export function watchConnection(redis: Redis, where: string, logger: Logger, what: string): void {
  let up: boolean | undefined;
  redis.on('ready', () => {
    if (up !== true) logger.info({ redis: where }, `${what} connected`);
    up = true;
  });
  redis.on('error', (err: NodeJS.ErrnoException) => {
    if (up !== false) logger.error({ redis: where, err: { code: err.code, message: err.message } }, `${what} unavailable`);
    up = false;
  });
  redis.on('close', () => {
    if (up === true) logger.error({ redis: where }, `${what} connection lost`);
    up = false;
  });
}
