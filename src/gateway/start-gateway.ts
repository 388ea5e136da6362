import { join } from 'node:path';
import { createAdminApi } from '../admin/admin-api.js';
import { createAdminServer } from '../admin/admin-server.js';
import { ADMIN_TOKENS_ENV, AdminTokens } from '../admin/admin-tokens.js';
import { GATEWAY_FILE, loadGatewayFile, loadPlans, PLANS_FILE } from '../config/load.js';
import { plansWithKnownServices, servicesKeepingPlanned } from '../config/plan-services.js';
import type { PlansConfig } from '../config/plans-schema.js';
import { Reloading } from '../config/reloading.js';
import type { Settings } from '../config/settings.js';
import { closeGracefully, listen } from '../http/listen.js';
import { assertionSecretsFromEnv, logSecretSource, type AssertionSecrets } from '../identity/assertion-secrets.js';
import type { Logger } from '../observability/log.js';
import { createMetrics } from '../observability/metrics.js';
import { scraper } from '../observability/scrape.js';
import { guardProcess } from '../observability/process-guard.js';
import { tracingFromEnv } from '../tracing/tracing-from-env.js';
import { StoreHealth } from '../store/store-health.js';
import { MemoryQuotaStore } from '../store/memory/memory-quota-store.js';
import { openStores, type Stores } from '../store/open-stores.js';
import { AssertionSigner } from './assertion-signer.js';
import type { Policy } from './context.js';
import { KeyCache } from './key-cache.js';
import { LocalVerdicts } from './local-verdicts.js';
import { applyRouteRules } from './policies/apply-route-rules.js';
import { authenticate } from './policies/authenticate.js';
import { enforceQuota } from './policies/enforce-quota.js';
import { failedAuthLimiter } from './policies/limit-failed-auth.js';
import { requestId } from './policies/request-id.js';
import { serveOpenApi } from './policies/serve-openapi.js';
import { serveUsage } from './policies/serve-usage.js';
import { upstreamIdentity } from './policies/upstream-identity.js';
import { loadOpenApiDocument, openApiRouteTemplates } from './openapi-document.js';
import { createUpstreamProxy } from './proxy.js';
import { routeToService } from './policies/route-to-service.js';
import { Upstreams } from '../upstream/upstreams.js';
import type { Pool } from 'undici';
import { routeLabeler } from './route-label.js';
import { RouteCosts } from './route-costs.js';
import { RouteRules } from './route-rules.js';
import { createGatewayServer } from './server.js';
import { edgeConnections } from './edge-connections.js';
import { testFaultsFromEnv } from './test-faults.js';

export interface RunningGateway {
  url: string;
  adminUrl: string;
  stores: Stores;
  close(): Promise<void>;
}

/**
 * Wires stores, caches, the policy chain and the proxy into a listening gateway and admin port.
 * `secrets` signs the upstream assertion; by default they are read from the environment.
 */
export async function startGateway(
  settings: Settings,
  logger: Logger,
  stores?: Stores,
  secrets?: AssertionSecrets,
): Promise<RunningGateway> {
  const adminTokens = AdminTokens.parse(process.env[ADMIN_TOKENS_ENV]);
  const ownStores = stores ?? (await openStores(settings.redis, settings.redis.commandTimeoutMs, logger, settings.admin.auditMaxEntries));
  // Route rules and services are the hot part of gateway.yaml (listeners, upstream.url and the
  // rest need a restart). It loads first: plans.yaml is checked against its services, and each
  // later reload of either file against the other one in force (plan-services.ts).
  // Set once plans.yaml is loaded, just below: the first gateway.yaml load has no plans to check.
  const inForce: { plans?: () => PlansConfig } = {};
  const routes = new Reloading(
    join(settings.configDir, GATEWAY_FILE),
    () => {
      const file = loadGatewayFile(settings.configDir);
      const { deprecations, costs } = file.routes;
      const services = inForce.plans ? servicesKeepingPlanned(file.services, inForce.plans()) : file.services;
      return { deprecations: new RouteRules(deprecations), costs: new RouteCosts(costs), services };
    },
    logger,
  );
  const plans = new Reloading(
    join(settings.configDir, PLANS_FILE),
    () => plansWithKnownServices(loadPlans(settings.configDir), routes.current().services),
    logger,
  );
  inForce.plans = () => plans.current();
  let plansLoadedAt = new Date().toISOString();
  plans.onChange(() => (plansLoadedAt = new Date().toISOString()));
  // Both files edited at once (a service added and a plan naming it, or both dropped): whichever
  // reload came first was refused, and is tried again once the other one is in force.
  routes.onChange(() => plans.retryRefused('gateway.yaml reloaded'));
  plans.onChange(() => routes.retryRefused('plans.yaml reloaded'));
  const assertionSecrets = secrets ?? assertionSecretsFromEnv(process.env);
  if (!secrets) logSecretSource(assertionSecrets, logger, 'gateway');
  const assertions = new AssertionSigner(assertionSecrets.current, settings.assertion, settings.keyCache.maxEntries);

  const metrics = createMetrics();
  // OTEL_* set (an OTLP endpoint above all): spans per request; unset: undefined, and no cost.
  const tracing = tracingFromEnv(process.env, {
    defaultServiceName: 'tollgate-gateway',
    logger,
    dropped: (spans, reason) => metrics.traceSpansDropped.inc({ reason }, spans),
  });
  guardProcess(logger, () => metrics.uncaughtErrors.inc());
  // One breaker for the shared store: once a command fails, requests stop waiting on Redis and
  // use their fallbacks at once, while one probe every half second finds out when it is back.
  const health = new StoreHealth('redis', logger);
  health.onChange((down) => metrics.degraded.set(down ? 1 : 0));

  const keys = new KeyCache(ownStores.keys, {
    freshMs: settings.keyCache.ttlSeconds * 1000,
    staleMs: settings.keyCache.staleSeconds * 1000,
    maxEntries: settings.keyCache.maxEntries,
    health,
  });
  const verdicts = new LocalVerdicts(settings.keyCache.maxEntries);
  // A key change (revocation, unban) can lift a cached ban; a plans reload cannot.
  ownStores.keys.onChange((id) => verdicts.forget(id));

  const failedAuth = failedAuthLimiter(settings.unauthenticated.perMinute, ownStores.redis, settings.gateway.trustProxyHops);
  const pools: Pool[] = [];
  let watchPool: (pool: Pool) => void = (pool) => {
    pools.push(pool);
  };
  const upstreams = new Upstreams(
    settings.upstream,
    routes.current().services,
    {
      ejected: (service, target, forMs) => {
        metrics.ejections.inc({ service, target });
        logger.warn({ service, target, forMs }, 'target ejected after consecutive failures');
      },
      panic: (service) => metrics.panics.inc({ service }),
      pool: (pool) => watchPool(pool),
    },
    logger,
  );
  routes.onChange((next) => upstreams.apply(next.services));
  const proxy = createUpstreamProxy(upstreams, settings.gateway.trustProxyHops, logger, metrics);
  // Pools made before the proxy existed, and every later one.
  for (const pool of pools) proxy.watchPool(pool);
  watchPool = proxy.watchPool;
  // Metrics labels: the API's OpenAPI routes and the route rules at start; anything else is one label.
  const route = routeLabeler([
    ...openApiRouteTemplates(loadOpenApiDocument(settings.openapi.file, settings.configDir)),
    ...loadGatewayFile(settings.configDir).routes.deprecations.map((rule) => rule.path),
  ]);

  // The policy chain, in order. Each returns a decision; the first rejection answers the request.
  const chain: readonly Policy[] = [
    requestId,
    serveOpenApi(settings.openapi, settings.configDir),
    failedAuth.wrap(authenticate(keys, failedAuth.blockedSeconds)),
    serveUsage(settings.usage.path, { quotas: ownStores.quotas, plans: () => plans.current(), health }),
    routeToService(upstreams, { quotas: ownStores.quotas, plans: () => plans.current(), health }),
    enforceQuota({
      store: ownStores.quotas,
      health,
      plans: () => plans.current(),
      costs: () => routes.current().costs,
      local: verdicts,
      fallback: { mode: settings.quota.onRedisFailure, store: new MemoryQuotaStore(), replicas: settings.quota.replicas },
      metrics,
      logger,
    }),
    applyRouteRules(() => routes.current().deprecations),
    upstreamIdentity(assertions),
  ];

  const { guard, tunnels } = edgeConnections(settings.gateway, upstreams, ownStores.keys, logger, metrics.registry);
  // gateway.tls set: HTTPS, and HTTP/2 by ALPN, on the same port (http/tls-listener.ts).
  const tls = settings.gateway.tls.cert ? settings.gateway.tls : undefined;
  const faults = testFaultsFromEnv(process.env, logger);
  const server = createGatewayServer({
    chain,
    route,
    proxy,
    logger,
    metrics,
    timeouts: settings.gateway,
    guard,
    tunnels,
    tls,
    tracing,
    faults,
  });
  const admin = createAdminServer(
    {
      metrics: scraper(metrics.registry),
      readiness: async () => ({
        redis: ownStores.redis
          ? await ownStores.redis.ping().then(
              () => true,
              () => false,
            )
          : true,
        // A backend refusing our assertions (secret mismatch) makes every proxied request a 502.
        upstreamAcceptsAssertion: proxy.assertionAccepted(),
      }),
      services: () => upstreams.summary(),
    },
    adminTokens.configured
      ? createAdminApi(
          {
            lifecycle: {
              keys: ownStores.keys,
              quotas: ownStores.quotas,
              audit: ownStores.audit,
              plans: () => plans.current(),
              now: Date.now,
            },
            plans: () => ({ config: plans.current(), loadedAt: plansLoadedAt }),
            services: () => upstreams.describe(),
            traffic: metrics.traffic,
          },
          adminTokens,
          logger,
        )
      : undefined,
    logger,
    faults,
  );

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
      routes.close();
      // WebSocket tunnels are long-lived: cut at once, not waited for over the grace period.
      tunnels.close();
      await closeGracefully(server, settings.gateway.shutdownGraceSeconds * 1000);
      await closeGracefully(admin, 0);
      upstreams.close();
      await ownStores.close();
      await tracing?.shutdown();
    },
  };
}
