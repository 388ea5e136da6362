import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { gatewayFileSchema } from '../../src/config/gateway-schema.js';
import { loadSettings } from '../../src/config/settings.js';

// gateway.trustedProxies: networks of the proxies whose X-Forwarded-For is believed (proxy-trust.ts).

const parse = (gateway: Record<string, unknown>) => gatewayFileSchema.safeParse({ gateway });

describe('gateway.trustedProxies', () => {
  it('is empty by default and takes addresses and CIDRs, IPv4 and IPv6', () => {
    expect(parse({}).data?.gateway.trustedProxies).toEqual([]);
    expect(parse({ trustedProxies: ['10.0.0.0/8', '127.0.0.2', 'fd00::/8'] }).success).toBe(true);
  });

  it('refuses what is not a network, naming the entry', () => {
    const result = parse({ trustedProxies: ['10.0.0.0/33'] });
    expect(result.success).toBe(false);
    expect(result.error!.issues[0]!.path).toEqual(['gateway', 'trustedProxies', 0]);
  });

  it('refuses trustedProxies beside trustProxyHops: one says which peers are proxies, the other only how many', () => {
    const result = parse({ trustedProxies: ['10.0.0.0/8'], trustProxyHops: 1 });
    expect(result.success).toBe(false);
    expect(result.error!.issues[0]!.path).toEqual(['gateway', 'trustedProxies']);
    expect(result.error!.issues[0]!.message).toContain('not both');
  });
});

describe('TRUSTED_PROXIES', () => {
  const TOLLGATE_CONFIG_DIR = fileURLToPath(new URL('../../config', import.meta.url));

  it('sets gateway.trustedProxies from a comma-separated list', () => {
    const settings = loadSettings({ TOLLGATE_CONFIG_DIR, TRUSTED_PROXIES: '10.0.0.0/8, 192.168.0.0/16' });
    expect(settings.gateway.trustedProxies).toEqual(['10.0.0.0/8', '192.168.0.0/16']);
  });

  it('names the variable when an entry is not a network, and refuses it beside TRUST_PROXY_HOPS', () => {
    expect(() => loadSettings({ TOLLGATE_CONFIG_DIR, TRUSTED_PROXIES: '10.0.0.0/33' })).toThrow(
      /^environment: TRUSTED_PROXIES: .*10\.0\.0\.0\/33/,
    );
    expect(() => loadSettings({ TOLLGATE_CONFIG_DIR, TRUSTED_PROXIES: '10.0.0.0/8', TRUST_PROXY_HOPS: '1' })).toThrow(
      /^environment: TRUSTED_PROXIES: set trustedProxies or trustProxyHops/,
    );
  });
});
