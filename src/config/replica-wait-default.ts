import { topologyOf, type RedisTarget } from './redis-target.js';

/** gateway.yaml quota.waitForReplica as written: a wait, `false` (off), or absent (the default). */
export type ReplicaWaitSetting = { replicas: number; timeoutMs: number } | false | undefined;

/** A Sentinel master's default WAIT: one replica, well within the command timeout. */
const SENTINEL_WAIT_MS = 50;

/**
 * The WAIT in force, if any. A Sentinel deployment is run so that a master's loss loses nothing:
 * without a WAIT, the writes a demoted master had not yet sent (replication is asynchronous) are
 * lost with it, a thousand or more counted requests in a busy second (docs/operations.md, "Failure
 * modes"). So there the default is one replica's acknowledgement; `false` turns it off. One server
 * (`url`) may have no replica at all, and a Cluster has no one connection to WAIT on: off unless set.
 */
export function replicaWaitInForce(
  setting: ReplicaWaitSetting,
  redis: RedisTarget,
  commandTimeoutMs: number,
): { replicas: number; timeoutMs: number } | undefined {
  if (setting !== undefined) return setting || undefined;
  if (topologyOf(redis) !== 'sentinel') return undefined;
  // The WAIT runs under the command timeout (gateway-schema.ts): a fifth of it at most.
  return { replicas: 1, timeoutMs: Math.max(1, Math.min(SENTINEL_WAIT_MS, Math.floor(commandTimeoutMs / 5))) };
}
