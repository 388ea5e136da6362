import { join } from 'node:path';
import { createAdminServer } from '../admin/admin-server.js';
import { loadPlans, PLANS_FILE } from '../config/load.js';
import { Reloading } from '../config/reloading.js';
import type { Settings } from '../config/settings.js';
import { canConnect } from '../http/probe.js';
import { closeGracefully, listen } from '../http/listen.js';
import type { Logger } from '../observability/log.js';
import { MemoryQuotaStore } from '../store/memory/memory-quota-store.js';
import { openStores, type Stores } from '../store/open-stores.js';
import type { Policy } from './context.js';
import { KeyCache } from './key-cache.js';
import { LocalVerdicts } from './local-verdicts.js';
import { authenticate } from './policies/authenticate.js';
import { enforceQuota } from './policies/enforce-quota.js';
import { failedAuthLimiter } from './policies/limit-failed-auth.js';
import { requestId } from './policies/request-id.js';
import { upstreamIdentity } from './policies/upstream-identity.js';
import { createUpstreamProxy } from './proxy.js';
import { createGatewayServer } from './server.js';

export interface RunningGateway {
  url: string;
  adminUrl: string;
  stores: Stores;
  close(): Promise<void>;
}

/** Wires stores, caches, the policy chain and the proxy into a listening gateway and admin port. */
export async function startGateway(settings: Settings, logger: Logger, stores?: Stores): Promise<RunningGateway> {
  const ownStores = stores ?? await openStores(settings.redis.url, settings.redis.commandTimeoutMs, logger);
  const plans = new Reloading(join(settings.configDir, PLANS_FILE), () => loadPlans(settings.configDir), logger);

  const keys = new KeyCache(ownStores.keys, {
    freshMs: settings.keyCache.ttlSeconds * 1000,
    staleMs: settings.keyCache.staleSeconds * 1000,
    maxEntries: settings.keyCache.maxEntries,
  });
  const verdicts = new LocalVerdicts(
    (id, rejections, quota, ban) => ownStores.quotas.reportRejections(id, rejections, quota, ban),
    settings.keyCache.maxEntries,
  );
  // A key change (revocation, plan, quota, unban) or a plans reload can lift a cached refusal.
  ownStores.keys.onChange((id) => verdicts.forget(id));
  plans.onChange(() => verdicts.forget(null));

  const failedAuth = failedAuthLimiter(settings.unauthenticated.perMinute, ownStores.redis);
  const proxy = createUpstreamProxy(settings.upstream, logger);

  // The policy chain, in order. Each returns a decision; the first rejection answers the request.
  const chain: readonly Policy[] = [
    requestId,
    failedAuth.wrap(authenticate(keys, failedAuth.blockedSeconds)),
    enforceQuota({
      store: ownStores.quotas,
      plans: () => plans.current(),
      local: verdicts,
      fallback: { mode: settings.quota.onRedisFailure, store: new MemoryQuotaStore(), replicas: settings.quota.replicas },
      onStoreFailure: () => {},
      logger,
    }),
    upstreamIdentity,
  ];

  const server = createGatewayServer({ chain: () => chain, proxy, logger });
  const admin = createAdminServer({
    readiness: async () => ({
      redis: ownStores.redis ? await ownStores.redis.ping().then(() => true, () => false) : true,
      upstream: await canConnect(settings.upstream.url, 1000),
    }),
  });

  const url = await listen(server, settings.gateway.host, settings.gateway.port);
  const adminUrl = await listen(admin, settings.admin.host, settings.admin.port);
  logger.info({ url, upstream: settings.upstream.url }, 'gateway listening');
  logger.info({ url: adminUrl }, 'admin listening');

  return {
    url,
    adminUrl,
    stores: ownStores,
    async close() {
      plans.close();
      await closeGracefully(server, settings.gateway.shutdownGraceSeconds * 1000);
      await closeGracefully(admin, 0);
      verdicts.close();
      proxy.close();
      await ownStores.close();
    },
  };
}
