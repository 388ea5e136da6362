import type { Logger } from '../../observability/log.js';
import type { Metrics } from '../../observability/metrics.js';
import type { PolicyKv, PolicyMetrics } from '../../plugins/policy-context.js';
import { kvArgumentProblem, type PolicyKvStore } from '../../store/policy-kv-store.js';
import { MemoryPolicyKv } from '../../store/memory/memory-policy-kv.js';
import type { RedisClient } from '../../store/redis/connect.js';
import { RedisPolicyKv } from '../../store/redis/redis-policy-kv.js';
import type { PolicyTools } from './policy-context.js';

const MAX_EVENTS = 50;

/** Each policy's tools on the gateway's store: its Redis (shared by replicas), else memory (one process). */
export function policyTools(redis: RedisClient | undefined, logger: Logger, metrics: Metrics): (name: string) => PolicyTools {
  return policyToolsFactory(redis ? new RedisPolicyKv(redis) : new MemoryPolicyKv(), logger, metrics);
}

/**
 * Each policy's logger, metrics and KV, made once per policy name and kept across reloads: the KV
 * namespace and the metrics label are the name, so two policies never see each other's keys or counts.
 */
export function policyToolsFactory(store: PolicyKvStore, logger: Logger, metrics: Metrics): (name: string) => PolicyTools {
  const made = new Map<string, PolicyTools>();
  return (name) => {
    let tools = made.get(name);
    if (!tools) made.set(name, (tools = { name, logger, metrics: scopedMetrics(name, metrics), kv: namespacedKv(name, store) }));
    return tools;
  };
}

function scopedMetrics(policy: string, metrics: Metrics): PolicyMetrics {
  const events = new Set<string>();
  return {
    count(event, by = 1) {
      if (typeof event !== 'string' || !Number.isFinite(by) || by < 0) throw new TypeError('count(event: string, by?: number ≥ 0)');
      // Bounded label values: a policy counting by request data cannot grow the scrape without end.
      if (!events.has(event) && events.size >= MAX_EVENTS) event = 'other';
      else events.add(event);
      metrics.policyEvents.inc({ policy, event }, by);
    },
  };
}

function namespacedKv(namespace: string, store: PolicyKvStore): PolicyKv {
  const checked = (key: string, value?: string, ttlSeconds?: number) => {
    const problem = kvArgumentProblem(key, value, ttlSeconds);
    return problem ? Promise.reject(new TypeError(problem)) : undefined;
  };
  return {
    get: (key) => checked(key) ?? store.get(namespace, key),
    set: (key, value, ttlSeconds) => checked(key, value, ttlSeconds) ?? store.set(namespace, key, value, ttlSeconds),
    add: (key, value, ttlSeconds) => checked(key, value, ttlSeconds) ?? store.add(namespace, key, value, ttlSeconds),
    delete: (key) => checked(key) ?? store.delete(namespace, key),
  };
}
