import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadSettings } from '../../src/config/settings.js';

// The environment variables a container deployment sets (docker-compose.yml) override gateway.yaml.

const TOLLGATE_CONFIG_DIR = fileURLToPath(new URL('../../config', import.meta.url));

describe('deployment settings from the environment', () => {
  it('keeps the shipped defaults without them', () => {
    const settings = loadSettings({ TOLLGATE_CONFIG_DIR });
    expect(settings.admin.host).toBe('127.0.0.1');
    expect(settings.backend.host).toBe('127.0.0.1');
    expect(settings.quota.replicas).toBe(1);
    expect(settings.gateway.trustProxyHops).toBe(0);
    expect(settings.redis).toMatchObject({ url: '', clusterNodes: [], sentinels: [], sentinelMaster: 'mymaster' });
  });

  it('applies ADMIN_HOST, BACKEND_HOST, QUOTA_REPLICAS, TRUST_PROXY_HOPS and REDIS_CLUSTER_NODES', () => {
    const settings = loadSettings({
      TOLLGATE_CONFIG_DIR,
      ADMIN_HOST: '0.0.0.0',
      BACKEND_HOST: '0.0.0.0',
      QUOTA_REPLICAS: '3',
      TRUST_PROXY_HOPS: '1',
      REDIS_CLUSTER_NODES: 'redis-1:6379,redis-2:6379',
    });
    expect(settings.admin.host).toBe('0.0.0.0');
    expect(settings.backend.host).toBe('0.0.0.0');
    expect(settings.quota.replicas).toBe(3);
    expect(settings.gateway.trustProxyHops).toBe(1);
    expect(settings.redis.clusterNodes).toEqual(['redis-1:6379', 'redis-2:6379']);
  });

  it('refuses out-of-range values, naming the variable', () => {
    expect(() => loadSettings({ TOLLGATE_CONFIG_DIR, QUOTA_REPLICAS: '0' })).toThrow(/^environment: QUOTA_REPLICAS: .*>=1.* \(got "0"\)$/);
    expect(() => loadSettings({ TOLLGATE_CONFIG_DIR, TRUST_PROXY_HOPS: 'yes' })).toThrow(
      /^environment: TRUST_PROXY_HOPS: .*\(got "yes"\)$/,
    );
    expect(() => loadSettings({ TOLLGATE_CONFIG_DIR, GATEWAY_PORT: '70000' })).toThrow(/^environment: GATEWAY_PORT: /);
    expect(() => loadSettings({ TOLLGATE_CONFIG_DIR, LOG_LEVEL: 'loud' })).toThrow(/^environment: LOG_LEVEL: .*\(got "loud"\)$/);
    // The same check as a value in the file, and the value is not echoed (a URL may hold credentials).
    expect(() => loadSettings({ TOLLGATE_CONFIG_DIR, UPSTREAM_URL: 'ftp://u:pw@x' })).toThrow(
      /^environment: UPSTREAM_URL: must be an http:\/\/ or https:\/\/ URL$/,
    );
  });

  it('treats an empty variable as unset, and lets LOG_LEVEL override the file', () => {
    const settings = loadSettings({ TOLLGATE_CONFIG_DIR, ADMIN_HOST: '', GATEWAY_PORT: '', LOG_LEVEL: 'warn' });
    expect(settings.admin.host).toBe('127.0.0.1');
    expect(settings.gateway.port).toBe(8080);
    expect(settings.logLevel).toBe('warn');
    expect(settings.log.format).toBe('auto');
    expect(loadSettings({ TOLLGATE_CONFIG_DIR, LOG_FORMAT: 'json' }).log.format).toBe('json');
    expect(() => loadSettings({ TOLLGATE_CONFIG_DIR, LOG_FORMAT: 'xml' })).toThrow(/^environment: LOG_FORMAT: /);
  });

  it('names the file and field when the file is wrong and no variable set the field', () => {
    const dir = fileURLToPath(new URL('../fixtures/config-gateway-port-out-of-range', import.meta.url));
    expect(() => loadSettings({ TOLLGATE_CONFIG_DIR: dir })).toThrow(/^gateway.yaml: gateway.port: /);
    // A variable that sets the field replaces the bad value.
    expect(loadSettings({ TOLLGATE_CONFIG_DIR: dir, GATEWAY_PORT: '8088' }).gateway.port).toBe(8088);
  });
});
