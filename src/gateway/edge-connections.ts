import type { Registry } from 'prom-client';
import type { ProxyTrust } from '../http/proxy-trust.js';
import type { Settings } from '../config/settings.js';
import { ConnectionGuard } from '../http/connection-guard.js';
import type { KeyRecord } from '../keys/record.js';
import type { Logger } from '../observability/log.js';
import type { KeyStore } from '../store/key-store.js';
import type { Upstreams } from '../upstream/upstreams.js';
import { WebSocketTunnels } from './websocket-proxy.js';

/**
 * What the public listener holds beyond single requests: the guard on its connections (silent
 * ones closed, a cap per address) and its WebSocket tunnels, which close when the key they were
 * opened with is revoked or expires, at the expiry the key has now (key changes reach every
 * replica: key-store.ts).
 */
export function edgeConnections(
  gateway: Settings['gateway'],
  proxyTrust: ProxyTrust,
  upstreams: Upstreams,
  keys: KeyStore,
  logger: Logger,
  registry: Registry,
) {
  const guard = new ConnectionGuard(gateway, registry);
  const tunnels = new WebSocketTunnels(upstreams, proxyTrust, { idleTimeoutMs: gateway.webSocketIdleTimeoutMs }, logger, registry);
  keys.onChange((id) => {
    if (id === null || !tunnels.hasKey(id)) return;
    keys.get(id).then(
      (record) => {
        if (usable(record, Date.now())) {
          // An expiry set, moved or removed since: the tunnels close at the new one, if any.
          tunnels.keyExpiryChanged(id, record.expiresAt === undefined ? undefined : Date.parse(record.expiresAt));
          return;
        }
        const closed = tunnels.closeKey(id);
        logger.info({ keyId: id, closed }, 'websocket tunnels closed: key no longer valid');
      },
      (err: unknown) => logger.warn({ err, keyId: id }, 'websocket tunnels: key re-read failed'),
    );
  });
  return { guard, tunnels };
}

function usable(record: KeyRecord | null, nowMs: number): record is KeyRecord {
  if (!record || record.status !== 'active') return false;
  return record.expiresAt === undefined || Date.parse(record.expiresAt) > nowMs;
}
