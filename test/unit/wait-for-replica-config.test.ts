import { describe, expect, it } from 'vitest';
import { gatewayFileSchema } from '../../src/config/gateway-schema.js';
import { replicaWaitInForce } from '../../src/config/replica-wait-default.js';

// quota.waitForReplica: a WAIT after each turn's decisions (redis-quota-store.ts); by default on
// Sentinel only (replica-wait-default.ts).

const parse = (file: Record<string, unknown>) => gatewayFileSchema.safeParse(file);

describe('quota.waitForReplica', () => {
  it('is absent unless written, and takes replicas and timeoutMs', () => {
    expect(parse({}).data?.quota.waitForReplica).toBeUndefined();
    expect(parse({ quota: { waitForReplica: { replicas: 1, timeoutMs: 50 } } }).data?.quota.waitForReplica).toEqual({
      replicas: 1,
      timeoutMs: 50,
    });
  });

  it('refuses a timeoutMs not below redis.commandTimeoutMs: the WAIT would time the decisions out with it', () => {
    const result = parse({ redis: { commandTimeoutMs: 100 }, quota: { waitForReplica: { replicas: 1, timeoutMs: 100 } } });
    expect(result.success).toBe(false);
    expect(result.error!.issues[0]!.path).toEqual(['quota', 'waitForReplica', 'timeoutMs']);
    expect(result.error!.issues[0]!.message).toContain('redis.commandTimeoutMs (100)');
  });

  it('takes false: no WAIT, on Sentinel too', () => {
    expect(parse({ quota: { waitForReplica: false } }).data?.quota.waitForReplica).toBe(false);
    expect(replicaWaitInForce(false, { sentinels: ['127.0.0.1:26379'] }, 250)).toBeUndefined();
  });

  it('is one replica within 50 ms by default on Sentinel, none on one server or a Cluster', () => {
    expect(replicaWaitInForce(undefined, { sentinels: ['127.0.0.1:26379'] }, 250)).toEqual({ replicas: 1, timeoutMs: 50 });
    expect(replicaWaitInForce(undefined, { url: 'redis://127.0.0.1:6379' }, 250)).toBeUndefined();
    expect(replicaWaitInForce(undefined, { clusterNodes: ['127.0.0.1:7000'] }, 250)).toBeUndefined();
    expect(replicaWaitInForce(undefined, {}, 250)).toBeUndefined();
    // Within a short command timeout (the schema refuses a written one that is not).
    expect(replicaWaitInForce(undefined, { sentinels: ['127.0.0.1:26379'] }, 100)).toEqual({ replicas: 1, timeoutMs: 20 });
    // What is written wins.
    expect(replicaWaitInForce({ replicas: 2, timeoutMs: 10 }, { sentinels: ['127.0.0.1:26379'] }, 250)).toEqual({
      replicas: 2,
      timeoutMs: 10,
    });
  });

  it('refuses fields it does not know', () => {
    expect(parse({ quota: { waitForReplica: { replicas: 1, timeoutMs: 50, numreplicas: 1 } } }).success).toBe(false);
  });
});
