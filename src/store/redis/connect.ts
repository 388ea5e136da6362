import type { Socket } from 'node:net';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { Logger } from '../../observability/log.js';
import { asTarget, describeRedis, parseNodeList, topologyOf, type RedisTarget } from '../../config/redis-target.js';

export type RedisRole = 'gateway' | 'backend' | 'cli';

/** One Redis server (possibly found through Sentinel) or a Redis Cluster: the stores take either. */
export type RedisClient = Redis | Cluster;

/**
 * One place that decides how we talk to Redis.
 * - gateway, backend (servers): fail fast. Commands time out after `commandTimeoutMs`, nothing queues while
 *   disconnected (a request must not wait for a reconnect), and reconnects go on forever with a
 *   capped backoff so recovery is automatic.
 * - cli: one short attempt, then a clear error (an operator is waiting at a prompt).
 *
 * The target is a URL (one server), Cluster seed nodes, or Sentinels; the same rules apply to each.
 */
export function connectRedis(target: string | RedisTarget, role: RedisRole, commandTimeoutMs = 250): RedisClient {
  const t = asTarget(target);
  const server = role !== 'cli';
  const backoffMs = (attempt: number) => Math.min(50 * 2 ** attempt, 1000);
  const common: RedisOptions = {
    connectionName: `tollgate-${role}`,
    maxRetriesPerRequest: 0,
    ...(server
      ? { commandTimeout: commandTimeoutMs, connectTimeout: Math.max(1000, commandTimeoutMs * 4) }
      : { commandTimeout: 5000, connectTimeout: 2000 }),
  };

  switch (topologyOf(t)) {
    case 'cluster': {
      const { nodes, username, password, tls } = parseNodeList(t.clusterNodes!);
      const options: ClusterOptions = {
        // Per-node connections: timeouts and credentials. (Node connections always queue while
        // they connect; whether a command may wait for the cluster is enableOfflineQueue below.)
        redisOptions: { ...common, username, password, ...(tls ? { tls: {} } : {}) },
        // Concurrent commands from many requests share one write per node: fewer syscalls.
        enableAutoPipelining: true,
        // Failover and resharding are found by MOVED replies and by this periodic refresh.
        slotsRefreshInterval: 5000,
        slotsRefreshTimeout: server ? Math.max(1000, commandTimeoutMs * 4) : 2000,
        ...(server
          ? {
              // Until the slots are loaded (and while the whole cluster is unreachable) commands
              // fail at once instead of queueing: the quota fallback answers meanwhile.
              enableOfflineQueue: false,
              clusterRetryStrategy: backoffMs,
              // ioredis would retry a command on a lost node or a CLUSTERDOWN up to 16 times, 100 ms
              // apart: seconds of stall per request. Fail it like any other Redis failure instead.
              retryDelayOnFailover: 0,
              retryDelayOnClusterDown: 0,
            }
          : { clusterRetryStrategy: () => null }),
      };
      const cluster = new Cluster(nodes, options);
      // ioredis connects to a node at its first command, so the first requests after startup (or
      // a failover) would pay a connection setup inside their tight timeout: connect at once.
      cluster.on('+node', (node: Redis) => {
        if (node.status === 'wait') node.connect().catch(() => {});
      });
      return cluster;
    }
    case 'sentinel': {
      const { nodes, username, password, tls } = parseNodeList(t.sentinels!);
      return new Redis({
        ...common,
        ...(server ? { enableOfflineQueue: false, retryStrategy: backoffMs } : { retryStrategy: () => null }),
        sentinels: nodes,
        name: t.sentinelMaster || 'mymaster',
        role: 'master',
        username,
        password,
        ...(tls ? { tls: {}, enableTLSForSentinelMode: true } : {}),
        sentinelRetryStrategy: server ? backoffMs : () => null,
        sentinelCommandTimeout: server ? Math.max(1000, commandTimeoutMs * 4) : 2000,
        // Follow a failover as soon as Sentinel announces it, and leave a master that was demoted
        // under us (its writes answer READONLY) to ask Sentinel for the new one.
        failoverDetector: true,
        reconnectOnError: (err) => err.message.startsWith('READONLY'),
        enableAutoPipelining: true,
      });
    }
    case 'none':
      throw new Error('no Redis configured (set REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS)');
    case 'single':
      return new Redis(t.url!, {
        ...common,
        // Concurrent commands from many requests share one write: fewer syscalls, same round trips.
        enableAutoPipelining: true,
        ...(server ? { enableOfflineQueue: false, retryStrategy: backoffMs } : { retryStrategy: () => null }),
      });
  }
}

/** A second connection to the same Redis for SUBSCRIBE (a subscribed connection runs no other commands). */
export function subscriberFor(client: RedisClient): RedisClient {
  const connectionName = 'tollgate-subscriber';
  if (client instanceof Cluster) {
    // PUBLISH on a Cluster reaches every node, so subscribing on any one of them is enough; ioredis
    // picks one and moves the subscription when that node goes away.
    return client.duplicate([], {
      enableOfflineQueue: true,
      redisOptions: { ...client.options.redisOptions, connectionName },
    });
  }
  return client.duplicate({ enableOfflineQueue: true, connectionName });
}

/**
 * Calls `onGap` whenever published messages may have been missed: after every (re)connection of
 * the subscriber and, on a Cluster, when a node is lost (the subscription may have lived there;
 * ioredis moves it to another node without an event, so once at once and once more a second
 * later). The main client watches the nodes: the subscriber's own pool only notices nodes it used.
 */
export function onSubscriptionGap(subscriber: RedisClient, main: RedisClient, onGap: () => void): void {
  subscriber.on('ready', onGap);
  for (const client of new Set([subscriber, main])) {
    onNodeLost(client, () => {
      onGap();
      setTimeout(onGap, 1000).unref();
    });
  }
}

/**
 * On a Cluster, calls `listener` once when a node's connection is lost, and not again for that
 * node until a connection to it has been ready again: while a master is down, ioredis opens and
 * loses a connection to it at every command routed there (after each MOVED), which is one loss.
 */
function onNodeLost(client: RedisClient, listener: (node: string) => void): void {
  if (!(client instanceof Cluster)) return;
  const lost = new Set<string>();
  const nameOf = (node: Redis) => `${node.options.host}:${node.options.port}`;
  client.on('+node', (node: Redis) => node.once('ready', () => lost.delete(nameOf(node))));
  client.on('-node', (node: Redis) => {
    const name = nameOf(node);
    if (lost.has(name)) return;
    lost.add(name);
    listener(name);
  });
}

/**
 * Resolves when the client is ready (a Cluster: its slots are loaded); rejects on timeout, or at
 * the first error when `failFast` (the CLI: one attempt, then a clear message).
 */
export function whenReady(redis: RedisClient, timeoutMs: number, failFast = false): Promise<void> {
  if (redis.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => finish(lastError ?? new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    const onReady = () => finish();
    let lastError: Error | undefined;
    const onError = (err: Error) => (failFast ? finish(withCause(err)) : (lastError = withCause(err)));
    // A Cluster reports each seed node's failure as 'node error': the reason to give if none answers.
    // (The first system error, e.g. ECONNREFUSED, says more than the "Connection is closed." after it.)
    const onNodeError = (err: NodeJS.ErrnoException) => {
      if (!lastError || (err.code && !(lastError as NodeJS.ErrnoException).code)) lastError = err;
    };
    const onEnd = () => finish(lastError ?? new Error('connection closed'));
    function finish(err?: Error) {
      clearTimeout(timer);
      redis.off('ready', onReady).off('error', onError).off('node error', onNodeError).off('end', onEnd);
      if (err) reject(err);
      else resolve();
    }
    redis.once('ready', onReady).on('error', onError).on('node error', onNodeError).once('end', onEnd);
  });
}

/** A Cluster reports "Failed to refresh slots cache." and keeps the useful reason inside. */
function withCause(err: Error): Error {
  const cause = (err as Error & { lastNodeError?: Error }).lastNodeError;
  return cause ? new Error(`${err.message.replace(/\.$/, '')}: ${cause.message}`) : err;
}

/** Logs each transition of the connection once (not every failed command, not every retry). */
export function watchConnection(redis: RedisClient, where: string, logger: Logger, what: string): void {
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
  // One node lost is not the whole cluster lost: only the keys in its slots fail meanwhile.
  onNodeLost(redis, (node) => logger.warn({ redis: where, node }, `${what}: cluster node lost`));
}

export { describeRedis };

/**
 * Redis just counted as unreachable while its connection still looks open (commands timed out: a
 * partition without FIN, a hung server): drop that connection and open a new one. Commands still
 * queued in the old one's path (kernel buffers on either side of a partition) would otherwise
 * reach Redis after the heal and count requests the gateway had already decided without it. A
 * Cluster keeps its connections: a node lost is found by its slot refresh and MOVED replies.
 */
export function reconnectIfStalled(client: RedisClient): void {
  if (client instanceof Cluster || client.status !== 'ready') return;
  // A reset, not a FIN: a graceful close would have the kernel keep retransmitting the queued
  // commands after the heal. ioredis takes the reset as a lost connection and reconnects.
  const stream = client.stream as Socket | undefined;
  if (stream?.resetAndDestroy) stream.resetAndDestroy();
  else client.disconnect(true);
}

/**
 * The connection a Cluster client's subscriptions live on (one node's; ioredis picks it, and picks
 * another, subscribing again, when it ends). ioredis does not expose it: its ClusterSubscriber's
 * `getInstance()` is read here, in one place, so an ioredis upgrade that moves it breaks one
 * function (and test/integration/redis-subscriptions-cluster.test.ts), not the heartbeat's logic.
 */
export function clusterSubscription(cluster: Cluster): Redis | undefined {
  const subscriber = (cluster as unknown as { subscriber?: { getInstance?(): Redis | null } }).subscriber;
  return subscriber?.getInstance?.() ?? undefined;
}
