import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/config-error.js';
import { gatewayFileSchema } from '../../src/config/gateway-schema.js';
import { loadSettings } from '../../src/config/settings.js';
import { describeRedis, nodeEntryError, parseNodeList, splitNodeList, topologyOf } from '../../src/config/redis-target.js';

const TOLLGATE_CONFIG_DIR = fileURLToPath(new URL('../fixtures/config-redis-url', import.meta.url));
const redisSettings = (env: NodeJS.ProcessEnv) => loadSettings({ TOLLGATE_CONFIG_DIR, ...env }).redis;

describe('Redis node lists', () => {
  it('parse host:port entries, and credentials and TLS from the URL form for every node', () => {
    expect(splitNodeList(' a:1, b:2 ,,')).toEqual(['a:1', 'b:2']);
    expect(parseNodeList(['10.0.0.1:7000', 'redis-2:7001', '[::1]:7002'])).toEqual({
      nodes: [
        { host: '10.0.0.1', port: 7000 },
        { host: 'redis-2', port: 7001 },
        { host: '::1', port: 7002 },
      ],
      tls: false,
    });
    expect(parseNodeList(['rediss://app:s%40cret@a:7000', 'b:7001'])).toEqual({
      nodes: [
        { host: 'a', port: 7000 },
        { host: 'b', port: 7001 },
      ],
      username: 'app',
      password: 's@cret',
      tls: true,
    });
  });

  it('refuse entries without a port, with a path, or with bare credentials', () => {
    for (const bad of ['redis-1', 'a:1/0', 'user:pw@a:1', 'http://a:1', 'a:99999']) expect(nodeEntryError(bad), bad).toBeTruthy();
    expect(nodeEntryError('a:6379')).toBeUndefined();
  });

  it('describe a target without its password', () => {
    expect(describeRedis('redis://:pw@h:1')).toBe('redis://:***@h:1');
    expect(describeRedis({ clusterNodes: ['redis://u:pw@a:1', 'b:2'] })).toBe('cluster a:1,b:2');
    expect(describeRedis({ sentinels: ['s:26379'], sentinelMaster: 'm' })).toBe('sentinel m@s:26379');
    expect(topologyOf({ url: '', clusterNodes: [], sentinels: [] })).toBe('none');
  });
});

describe('Redis settings from gateway.yaml and the environment', () => {
  it("takes REDIS_CLUSTER_NODES over the file, and REDIS_URL over the file's URL", () => {
    // The fixture's gateway.yaml names redis://file:6379.
    expect(redisSettings({})).toMatchObject({ url: 'redis://file:6379', clusterNodes: [] });
    expect(redisSettings({ REDIS_CLUSTER_NODES: 'a:1,b:2' })).toMatchObject({ url: '', clusterNodes: ['a:1', 'b:2'], sentinels: [] });
    expect(redisSettings({ REDIS_URL: 'redis://env:6379' })).toMatchObject({ url: 'redis://env:6379', clusterNodes: [] });
    expect(redisSettings({ REDIS_SENTINELS: 's:26379', REDIS_SENTINEL_MASTER: 'main' })).toMatchObject({
      url: '',
      sentinels: ['s:26379'],
      sentinelMaster: 'main',
    });
  });

  it('refuses two topologies at once and bad entries, naming the variable', () => {
    expect(() => redisSettings({ REDIS_URL: 'redis://a:1', REDIS_CLUSTER_NODES: 'b:2' })).toThrow(ConfigError);
    expect(() => redisSettings({ REDIS_URL: 'redis://a:1', REDIS_CLUSTER_NODES: 'b:2' })).toThrow(
      /^environment: REDIS_CLUSTER_NODES: set only one of/,
    );
    expect(() => redisSettings({ REDIS_CLUSTER_NODES: 'a:1,nope' })).toThrow(/^environment: REDIS_CLUSTER_NODES: "nope"/);
    // A password in a bad entry is not echoed.
    expect(() => redisSettings({ REDIS_CLUSTER_NODES: 'redis://u:hunter2@a' })).toThrow(
      /^environment: REDIS_CLUSTER_NODES: "redis:\/\/\*\*\*@a"/,
    );
    // An empty variable means "none", as REDIS_URL= always did.
    expect(redisSettings({ REDIS_URL: '', REDIS_CLUSTER_NODES: 'a:1' })).toMatchObject({ url: '', clusterNodes: ['a:1'] });
    expect(redisSettings({ REDIS_URL: '' })).toMatchObject({ url: '', clusterNodes: [], sentinels: [] });
  });

  it('refuses a gateway.yaml that names two topologies, or a bad node, with the field', () => {
    const both = gatewayFileSchema.safeParse({ redis: { url: 'redis://a:1', clusterNodes: ['b:2'] } });
    expect(both.success).toBe(false);
    expect(both.error!.issues[0]!.path).toEqual(['redis', 'clusterNodes']);
    const bad = gatewayFileSchema.safeParse({ redis: { clusterNodes: ['b'] } });
    expect(bad.error!.issues[0]!.path).toEqual(['redis', 'clusterNodes', 0]);
  });
});
