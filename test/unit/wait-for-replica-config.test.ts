import { describe, expect, it } from 'vitest';
import { gatewayFileSchema } from '../../src/config/gateway-schema.js';

// quota.waitForReplica: a WAIT after each turn's decisions (redis-quota-store.ts), off by default.

const parse = (file: Record<string, unknown>) => gatewayFileSchema.safeParse(file);

describe('quota.waitForReplica', () => {
  it('is off by default and takes replicas and timeoutMs', () => {
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

  it('refuses fields it does not know', () => {
    expect(parse({ quota: { waitForReplica: { replicas: 1, timeoutMs: 50, numreplicas: 1 } } }).success).toBe(false);
  });
});
