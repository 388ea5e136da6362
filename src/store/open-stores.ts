import type { Logger } from '../observability/log.js';
import type { AuditLog } from './audit-log.js';
import type { KeyStore } from './key-store.js';
import { MemoryAuditLog } from './memory/memory-audit-log.js';
import { MemoryKeyStore } from './memory/memory-key-store.js';
import { MemoryQuotaStore } from './memory/memory-quota-store.js';
import type { QuotaStore } from './quota-store.js';
import { RedisQuotaStore } from './redis/redis-quota-store.js';
import { connectRedis, watchConnection, whenReady, type RedisClient } from './redis/connect.js';
import { describeRedis, topologyOf, type RedisTarget } from '../config/redis-target.js';
import { RedisAuditLog } from './redis/redis-audit-log.js';
import { RedisKeyStore } from './redis/redis-key-store.js';
import { RedisWsTicketStore } from './redis/redis-ws-ticket-store.js';
import { MemoryWsTicketStore } from './memory/memory-ws-ticket-store.js';
import type { WsTicketStore } from './ws-ticket-store.js';
import { DEFAULT_USAGE_RETENTION_MS, type UsageReader } from './usage-store.js';
import { MemoryUsage } from './memory/memory-usage.js';
import { RedisUsageReader } from './redis/redis-usage-reader.js';

const STARTUP_WAIT_MS = 5000;
/** The default of gateway.yaml's admin.auditMaxEntries. */
const DEFAULT_AUDIT_MAX_ENTRIES = 100_000;

export interface Stores {
  keys: KeyStore;
  quotas: QuotaStore;
  audit: AuditLog;
  /** WebSocket tickets waiting for their handshake (ws-ticket-store.ts). */
  tickets: WsTicketStore;
  /** The shared Redis client, absent on the embedded store. */
  redis?: RedisClient;
  /** Usage for invoicing as the quota step keeps it (usage-store.ts). */
  usage: UsageReader;
  close(): Promise<void>;
}

/**
 * Redis when one is configured (a URL, Cluster nodes or Sentinels), the embedded in-memory store otherwise. A configured Redis that
 * is down is never silently replaced by memory: requests get 503 until it is back.
 */
export async function openStores(
  target: string | RedisTarget,
  commandTimeoutMs: number,
  logger: Logger,
  auditMaxEntries = DEFAULT_AUDIT_MAX_ENTRIES,
  /** Tests only (gateway/test-clock.ts): the quota store's clock instead of Redis's. */
  quotaClock?: () => number,
  /** gateway.yaml quota.usage.retentionDays in ms (0: no usage kept). */
  usageRetentionMs = DEFAULT_USAGE_RETENTION_MS,
): Promise<Stores> {
  if (topologyOf(target) === 'none') {
    logger.warn('no REDIS_URL: using the embedded in-memory store (one process only, nothing persisted)');
    return memoryStores(new MemoryKeyStore(), auditMaxEntries, usageRetentionMs);
  }
  const redis = connectRedis(target, 'gateway', commandTimeoutMs);
  watchConnection(redis, describeRedis(target), logger, 'redis');
  // Serve only once Redis answers, or after a bounded wait (then 503s until it does; never memory).
  await whenReady(redis, STARTUP_WAIT_MS).catch(() => {});
  const keys = new RedisKeyStore(redis);
  const quotas = new RedisQuotaStore(redis, quotaClock, usageRetentionMs);
  return {
    keys,
    quotas,
    audit: new RedisAuditLog(redis, auditMaxEntries),
    tickets: new RedisWsTicketStore(redis),
    redis,
    usage: new RedisUsageReader(redis),
    async close() {
      await keys.close();
      await quotas.close();
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}

/** The embedded store around `keys` (which `tollgate up` may have seeded with demo keys). */
export function memoryStores(
  keys: MemoryKeyStore,
  auditMaxEntries = DEFAULT_AUDIT_MAX_ENTRIES,
  usageRetentionMs = DEFAULT_USAGE_RETENTION_MS,
): Stores {
  const usage = new MemoryUsage(usageRetentionMs);
  return {
    keys,
    quotas: new MemoryQuotaStore(Date.now, usage),
    usage,
    audit: new MemoryAuditLog(auditMaxEntries),
    tickets: new MemoryWsTicketStore(),
    close: async () => {},
  };
}
