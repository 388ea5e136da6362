import { nodeEntryError, splitNodeList } from '../store/redis/redis-target.js';
import { ConfigError } from './config-error.js';
import type { GatewayFile } from './gateway-schema.js';

type RedisFile = GatewayFile['redis'];

// Environment variables that each name one Redis topology. One set in the environment replaces
// whatever topology gateway.yaml names (an empty value means "none", as REDIS_URL= always did).
const TOPOLOGY_VARS = ['REDIS_URL', 'REDIS_CLUSTER_NODES', 'REDIS_SENTINELS'] as const;

/**
 * gateway.yaml's `redis` with the environment laid over it:
 * REDIS_URL (one server), REDIS_CLUSTER_NODES (host:port,… seed nodes of a Redis Cluster),
 * REDIS_SENTINELS (host:port,… Sentinels) with REDIS_SENTINEL_MASTER (the master's name).
 */
export function redisSettings(env: NodeJS.ProcessEnv, file: RedisFile): RedisFile {
  const given = TOPOLOGY_VARS.filter((name) => env[name] !== undefined);
  const nonEmpty = given.filter((name) => env[name] !== '');
  if (nonEmpty.length > 1) {
    throw new ConfigError('environment', nonEmpty[1]!, `set only one of ${TOPOLOGY_VARS.join(', ')} (${nonEmpty.join(' and ')} are set)`);
  }
  const sentinelMaster = env.REDIS_SENTINEL_MASTER || file.sentinelMaster;
  if (given.length === 0) return { ...file, sentinelMaster };
  return {
    ...file,
    url: env.REDIS_URL ?? '',
    clusterNodes: nodes(env, 'REDIS_CLUSTER_NODES'),
    sentinels: nodes(env, 'REDIS_SENTINELS'),
    sentinelMaster,
  };
}

function nodes(env: NodeJS.ProcessEnv, name: string): string[] {
  const entries = splitNodeList(env[name] ?? '');
  for (const entry of entries) {
    const error = nodeEntryError(entry);
    if (error) throw new ConfigError('environment', name, `"${entry.replace(/\/\/[^@]*@/, '//***@')}": ${error}`);
  }
  return entries;
}
