import { join } from 'node:path';
import { DAY_MS } from '../quota/windows.js';
import { createAdminApi } from '../admin/admin-api.js';
import { JwtAuthenticator } from '../auth/jwt/jwt-authenticator.js';
import { createAdminServer } from '../admin/admin-server.js';
import { AdminTokens } from '../admin/admin-tokens.js';
import { GATEWAY_FILE, loadGatewayFile, loadPlans, PLANS_FILE } from '../config/load.js';
import { plansWithKnownServices, servicesKeepingPlanned } from '../config/plan-services.js';
import { anonymousPlansDefined, plansKeepingAnonymous } from '../config/anonymous-plans.js';
import { AnonymousConsumers } from '../auth/anonymous-consumer.js';
import { plansInZone, type PlansConfig } from '../config/plans-schema.js';
import { Reloading } from '../config/reloading.js';
import { replicaWaitInForce } from '../config/replica-wait-default.js';
import type { Settings } from '../config/settings.js';
import { Drain } from '../http/drain.js';
import { closeGracefully, listen } from '../http/listen.js';
import { assertionSecretsFromEnv, logSecretSource, type AssertionSecrets } from '../identity/assertion-secrets.js';
import type { Logger } from '../observability/log.js';
import { createMetrics, type Metrics } from '../observability/metrics.js';
import { scraper } from '../observability/scrape.js';
import { guardProcess } from '../observability/process-guard.js';
import { tracingFromEnv } from '../tracing/tracing-from-env.js';
import { StoreHealth, timeoutNotOutage } from '../store/store-health.js';
import { LoopLag } from '../observability/loop-lag.js';
import { reconnectIfStalled } from '../store/redis/connect.js';
import { DegradedMode } from './degraded-mode.js';
import { openStores, type Stores } from '../store/open-stores.js';
import { RedisQuotaStore } from '../store/redis/redis-quota-store.js';
import { UnreplicatedWrites } from './unreplicated-writes.js';
import { AssertionSigner } from './assertion-signer.js';
import type { Policy } from './context.js';
import { KeyCache } from './key-cache.js';
import { LocalVerdicts } from './local-verdicts.js';
import { RuleRefusals } from './rule-refusals.js';
import { ConcurrencySlots } from './concurrency-slots.js';
import { QuotaLeases, RECALL_GRACE_MS } from '../quota/quota-leases.js';
import { RuleLeases } from '../quota/rule-leases.js';
import { noticeListeners } from './notice-listeners.js';
import { applyRouteRules } from './policies/apply-route-rules.js';
import { authenticate } from './policies/authenticate.js';
import { authenticateWsTicket } from './policies/authenticate-ws-ticket.js';
import { cors } from './policies/cors.js';
import { serveWsTickets } from './policies/serve-ws-tickets.js';
import { enforceQuota } from './policies/enforce-quota.js';
import { failedAuthLimiter } from './policies/limit-failed-auth.js';
import { preflightLimiter } from './policies/limit-preflights.js';
import { requestId } from './policies/request-id.js';
import { serveOpenApi } from './policies/serve-openapi.js';
import { serveUsage } from './policies/serve-usage.js';
import { upstreamIdentity } from './policies/upstream-identity.js';
import { loadOpenApiDocument, openApiRouteTemplates } from './openapi-document.js';
import { createUpstreamProxy } from './proxy.js';
import { createCachingProxy } from './caching-proxy.js';
import { ResponseCache } from '../cache/response-cache.js';
import { routeToService } from './policies/route-to-service.js';
import { anonymousCaller, requireScopes } from './policies/access.js';
import { RouteAccess } from './route-access.js';
import { globalIpRules, ipRulesInForce, keyIpRules, serviceIpRules } from './policies/ip-rules.js';
import { validateRequest } from './policies/validate-request.js';
import { compileValidation } from './validation-rules.js';
import { Upstreams } from '../upstream/upstreams.js';
import type { Pool } from 'undici';
import { routeLabeler } from './route-label.js';
import { RouteCosts } from './route-costs.js';
import { ReservationSettler } from './reported-cost/settle-reservations.js';
import { LimitRules } from './limit-rules.js';
import { RouteRules } from './route-rules.js';
import { createGatewayServer } from './server.js';
import { edgeConnections } from './edge-connections.js';
import { ProxyTrust } from '../http/proxy-trust.js';
import { testFaultsFromEnv } from './test-faults.js';
import { compilePolicies, loadPolicies } from './user-policies/load-policies.js';
import { accessPhase, forwardPhase, type PhaseDeps } from './user-policies/phases.js';
import { policyTools } from './user-policies/policy-tools.js';
import { testClockFromEnv } from './test-clock.js';

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
  const adminTokens = AdminTokens.fromEnvironment(process.env);
  const ownStores =
    stores ??
    (await openStores(
      settings.redis,
      settings.redis.commandTimeoutMs,
      logger,
      settings.admin.auditMaxEntries,
      testClockFromEnv(process.env, logger),
      settings.quota.usage.retentionDays * DAY_MS,
    ));
  // Route rules and services are the hot part of gateway.yaml (listeners, upstream.url and the
  // rest need a restart). It loads first: plans.yaml is checked against its services, and each
  // later reload of either file against the other one in force (plan-services.ts).
  // Set once plans.yaml is loaded, just below: the first gateway.yaml load has no plans to check.
  const inForce: { plans?: () => PlansConfig; jwt?: JwtAuthenticator } = {};
  // The user's policies: code imported once, here; their options are bound at every load (docs/plugins.md).
  const policyCode = await loadPolicies(loadGatewayFile(settings.configDir), settings.configDir);
  const assertionSecrets = secrets ?? assertionSecretsFromEnv(process.env);
  // Limit rules' counters are named by digests under a key every replica derives alike (limit-rules.ts).
  const limitsKey = LimitRules.keyFrom(assertionSecrets.current.bytes);
  const routes = new Reloading(
    join(settings.configDir, GATEWAY_FILE),
    () => {
      const file = loadGatewayFile(settings.configDir);
      const { deprecations, costs, access } = file.routes;
      const services = inForce.plans ? servicesKeepingPlanned(file.services, inForce.plans()) : file.services;
      if (inForce.plans) anonymousPlansDefined(inForce.plans(), services, access);
      // Edge rules are compiled here, so a reload that cannot compile is refused as a whole.
      const ipRules = ipRulesInForce(file.ipRules, services);
      const validation = compileValidation(file, services, settings.configDir);
      // CORS is hot with the services it may be set on (policies/cors.ts).
      const cors = { global: file.cors, anyService: services.some((service) => service.cors !== undefined) };
      // Identity providers are hot too; an issuer whose key source is unchanged keeps its cached keys.
      const jwt =
        file.jwt && new JwtAuthenticator(file.jwt, logger, { previous: inForce.jwt, maxCachedTokens: settings.keyCache.maxEntries });
      return {
        policies: compilePolicies(file, services, policyCode),
        validation,
        deprecations: new RouteRules(deprecations),
        costs: new RouteCosts(costs),
        limits: new LimitRules(file.limits, services, limitsKey),
        globalLimits: file.limits,
        access: new RouteAccess(access, services),
        accessRules: access,
        services,
        ipRules,
        globalIpRules: file.ipRules,
        cors,
        jwt,
        consoleOidc: file.console.oidc,
      };
    },
    logger,
  );
  const plans = new Reloading(
    join(settings.configDir, PLANS_FILE),
    () => {
      const { services, accessRules } = routes.current();
      const loaded = plansWithKnownServices(loadPlans(settings.configDir), services);
      // At start, a plan gateway.yaml gives anonymous callers and plans.yaml lacks is gateway.yaml's
      // mistake (as check-config says); later, a plans.yaml edit that drops it is that edit's.
      if (!inForce.plans) anonymousPlansDefined(loaded, services, accessRules);
      return plansInZone(plansKeepingAnonymous(loaded, services, accessRules), settings.quota.timeZone);
    },
    logger,
  );
  inForce.plans = () => plans.current();
  let plansLoadedAt = new Date().toISOString();
  plans.onChange(() => (plansLoadedAt = new Date().toISOString()));
  // Both files edited at once (a service added and a plan naming it, or both dropped): whichever
  // reload came first was refused, and is tried again once the other one is in force.
  routes.onChange(() => plans.retryRefused('gateway.yaml reloaded'));
  inForce.jwt = routes.current().jwt;
  routes.onChange((next) => (inForce.jwt = next.jwt));
  plans.onChange(() => routes.retryRefused('plans.yaml reloaded'));
  if (!secrets) logSecretSource(assertionSecrets, logger, 'gateway');
  const assertions = new AssertionSigner(assertionSecrets.current, settings.assertion, settings.keyCache.maxEntries);

  const metrics = createMetrics();
  // OTEL_* set (an OTLP endpoint above all): spans per request; unset: undefined, and no cost.
  const tracing = await tracingFromEnv(process.env, {
    defaultServiceName: 'tollgate-gateway',
    logger,
    dropped: (spans, reason) => metrics.traceSpansDropped.inc({ reason }, spans),
  });
  guardProcess(logger, () => metrics.uncaughtErrors.inc());
  // One breaker for the shared store: once a command fails, requests stop waiting on Redis and
  // use their fallbacks at once, while one probe every half second finds out when it is back.
  // A Redis command that timed out while this process's own loop stalled does not trip it: the
  // loop was late, not Redis (store-health.ts); the request is shed instead (enforce-quota.ts).
  const loopLag = new LoopLag();
  const loopGauge = setInterval(() => metrics.loopStallSeconds.set(loopLag.worstWithinMs(10_000) / 1000), 5000).unref();
  const health = new StoreHealth('redis', logger, undefined, undefined, timeoutNotOutage(loopLag, settings.redis.commandTimeoutMs));
  health.onChange((down) => metrics.degraded.set(down ? 1 : 0));
  const { onRedisFailure } = settings.quota;
  const degraded = new DegradedMode(onRedisFailure, settings.quota.replicas, ownStores.quotas, logger, settings.keyCache.maxEntries);
  const unreplicated = waitForReplicas(settings, ownStores, logger, metrics);
  // Concurrency slots (maxConcurrent) this replica holds, kept alive while their requests are in flight.
  const slots = new ConcurrencySlots(metrics, logger);
  // Back from an outage: what was admitted without Redis is added to it, once (degraded-ledger.ts).
  health.onChange((down) => (down ? ownStores.redis && reconnectIfStalled(ownStores.redis) : degraded.recovered()));

  const keys = new KeyCache(ownStores.keys, {
    freshMs: settings.keyCache.ttlSeconds * 1000,
    staleMs: settings.keyCache.staleSeconds * 1000,
    maxEntries: settings.keyCache.maxEntries,
    health,
  });
  const verdicts = new LocalVerdicts(settings.keyCache.maxEntries);
  // A key change (revocation, unban) can lift a cached ban; a plans reload cannot.
  ownStores.keys.onChange((id) => verdicts.forget(id));
  // Leases need a store shared by replicas (Redis); the embedded store decides in memory anyway.
  const { leases: leaseSettings, replicas } = settings.quota;
  const quotas = ownStores.quotas;
  // One subscription to the notices, heard by the plans' leases and the rules' (rule-leases.ts).
  const hearing = noticeListeners(quotas, () => metrics.leaseNotices.inc());
  // A lease's grant, give-back or renewal is Redis answering, as a decision is: a replica whose
  // hot keys are all admitted from leases sends nothing else, and without these one command held
  // on the path would count as an outage (store-health.ts), its local counting admitting past the
  // limit while Redis still answers.
  const answered = <T>(reply: Promise<T>): Promise<T> =>
    reply.then((value) => {
      health.succeeded();
      return value;
    });
  const reserve = quotas.reserve?.bind(quotas);
  const reserving = reserve && { reserve: (...asked: Parameters<typeof reserve>) => answered(reserve(...asked)), notices: hearing };
  const leases = leaseSettings.enabled && reserving ? new QuotaLeases(reserving, { ...leaseSettings, replicas }) : undefined;
  // Limit rules' counters lease on one Redis server (not a Cluster: docs/policies.md).
  const ruleLeases =
    leases && quotas.reserveRule
      ? new RuleLeases(
          { reserveRule: (rule, request) => answered(quotas.reserveRule!(rule, request)), notices: hearing },
          // A rule's window may be a day long, its lease bound to leaseMs (rule-lease-script.ts): hot counters only.
          { ...leaseSettings, replicas, warmKeys: false },
        )
      : undefined;
  // A changed key (plan, record, ban, unban) ends its leases at once; a plans reload ends them on next use.
  if (leases) ownStores.keys.onChange((id) => leases.forget(id));

  // Which peers are proxies: one reading of X-Forwarded-For for limits, IP rules and the upstream's headers.
  const proxyTrust = new ProxyTrust(settings.gateway);
  const failedAuth = failedAuthLimiter(settings.unauthenticated.perMinute, ownStores.redis, proxyTrust);
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
  const upstreamProxy = createUpstreamProxy(upstreams, proxyTrust, logger, metrics);
  // Pools made before the proxy existed, and every later one.
  for (const pool of pools) upstreamProxy.watchPool(pool);
  watchPool = upstreamProxy.watchPool;
  // Services with `cache` in gateway.yaml: hits are answered in front of the forward (docs/cache.md).
  const responseCache = new ResponseCache(ownStores.redis, metrics, logger);
  const proxy = createCachingProxy(upstreamProxy, upstreams, responseCache, metrics);
  // Metrics labels: the API's OpenAPI routes and the route rules at start; anything else is one label.
  const route = routeLabeler([
    ...openApiRouteTemplates(loadOpenApiDocument(settings.openapi.file, settings.configDir)),
    ...loadGatewayFile(settings.configDir).routes.deprecations.map((rule) => rule.path),
  ]);

  // Reservations of costs the upstream reports, settled after their answers (reported-cost/).
  const settler = new ReservationSettler(ownStores.quotas, metrics, logger);
  const quota = enforceQuota({
    reservations: { settler, metrics, logger },
    store: ownStores.quotas,
    health,
    plans: () => plans.current(),
    costs: () => routes.current().costs,
    local: verdicts,
    // A rule's refusal holds until the rule could fit, where the store's counters only fill (with
    // leases of them, no longer than a lease's life and its grace: rule-refusals.ts).
    ruleRefusals: ownStores.quotas.rulesOnlyFill
      ? new RuleRefusals(settings.keyCache.maxEntries, Date.now, ruleLeases ? leaseSettings.leaseMs + RECALL_GRACE_MS : Infinity)
      : undefined,
    leases,
    ruleLeases,
    degraded,
    maxPending: settings.quota.maxPendingDecisions,
    commandTimeoutMs: settings.redis.commandTimeoutMs,
    slots,
    metrics,
    logger,
    limits: () => routes.current().limits,
    proxyTrust,
  });
  const access = {
    access: () => routes.current().access,
    upstreams,
    consumers: new AnonymousConsumers(assertionSecrets.current.bytes),
    proxyTrust,
  };
  const policies: PhaseDeps = {
    inForce: () => routes.current().policies,
    tools: policyTools(ownStores.redis, logger, metrics),
    proxyTrust,
    metrics,
    logger,
  };
  const planDeps = { quotas: ownStores.quotas, plans: () => plans.current(), health };
  const ipRules = {
    rules: () => routes.current().ipRules,
    upstreams,
    proxyTrust,
    metrics,
    policies,
    countFailure: failedAuth.counted,
  };

  // The policy chain, in order. Each returns a decision; the first rejection answers the request.
  const chain: readonly Policy[] = [
    requestId,
    // From memory, before anything else: a denied network costs no Redis command (docs/policies.md).
    globalIpRules(ipRules),
    cors({
      global: () => routes.current().cors.global,
      anyService: () => routes.current().cors.anyService,
      upstreams,
      countPreflight: preflightLimiter(ownStores.redis, proxyTrust),
    }),
    serveOpenApi(settings.openapi, settings.configDir),
    serviceIpRules(ipRules),
    failedAuth.wrap(
      authenticateWsTicket(
        ownStores.tickets,
        keys,
        authenticate(keys, failedAuth.blockedSeconds, () => inForce.jwt, anonymousCaller(access)),
        health,
      ),
    ),
    keyIpRules(ipRules),
    serveWsTickets(settings.webSocketTickets.path, {
      tickets: ownStores.tickets,
      quota,
      quotas: ownStores.quotas,
      plans: () => plans.current(),
      health,
    }),
    serveUsage(settings.usage.path, { quotas: ownStores.quotas, plans: () => plans.current(), health }),
    routeToService(upstreams, planDeps),
    requireScopes({ ...access, ...planDeps }),
    // The user's policies: refuse or add a cost to the one quota decision that follows.
    accessPhase(policies),
    quota,
    applyRouteRules(() => routes.current().deprecations),
    // After the quota (invalid requests are charged: a flood of them cannot skip it) and before the
    // proxy (they cost the backend nothing).
    validateRequest({ rules: () => routes.current().validation, metrics, logger }),
    upstreamIdentity(assertions),
    // After the decision and the identity fields: what the service's targets receive, and send back
    // (its header rules, then the user's policies).
    forwardPhase(policies),
  ];

  const { guard, tunnels } = edgeConnections(settings.gateway, proxyTrust, upstreams, ownStores.keys, logger, metrics.registry);
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
  const drain = new Drain(settings.gateway.drainDelaySeconds * 1000);
  drain.attach(server);
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
      // Redis unreachable is degraded, not unready, where the failure mode serves without it:
      // every replica shares that Redis, so 503 would take all of them out of the load balancer.
      degradable: onRedisFailure === 'closed' ? [] : ['redis'],
      services: () => upstreams.summary(),
      draining: () => drain.active,
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
            services: () =>
              upstreams.describe().map((described) => {
                const cache = responseCache.summary(described.name, upstreams.all().find((s) => s.name === described.name)?.config.cache);
                return cache ? { ...described, cache } : described;
              }),
            ipRules: () => routes.current().globalIpRules ?? null,
            limits: () => routes.current().globalLimits,
            traffic: metrics.traffic,
            usage: { reader: ownStores.usage, timeZone: settings.quota.timeZone },
            purgeCache: async (name, prefix) => {
              const service = upstreams.all().find((s) => s.name === name);
              return service ? responseCache.purge(name, service.config.cache, prefix) : undefined;
            },
          },
          adminTokens,
          logger,
          () => routes.current().consoleOidc,
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
      if (settings.gateway.drainDelaySeconds > 0) logger.info({ drainDelaySeconds: settings.gateway.drainDelaySeconds }, 'draining');
      // Still serving (and reloading config) while the load balancer stops sending here.
      await drain.begin();
      plans.close();
      routes.close();
      // WebSocket tunnels are long-lived: cut at once, not waited for over the grace period.
      tunnels.close();
      await closeGracefully(server, settings.gateway.shutdownGraceSeconds * 1000);
      await closeGracefully(admin, 0);
      upstreams.close();
      // Settlements of the answers just sent go out before the store closes (bounded by their retries).
      await settler.idle();
      await Promise.all([leases?.close(), ruleLeases?.close()]);
      degraded.close();
      unreplicated?.close();
      slots.close();
      loopLag.close();
      clearInterval(loopGauge);
      responseCache.close();
      await ownStores.close();
      await tracing?.shutdown();
    },
  };
}

/**
 * quota.waitForReplica on a single Redis or Sentinel master: each turn's decisions wait for a
 * replica's acknowledgement (redis-quota-store.ts), and those it did not come for in time are
 * kept until it does, or added to the master found after a lost connection (unreplicated-writes.ts).
 */
function waitForReplicas(settings: Settings, stores: Stores, logger: Logger, metrics: Metrics): UnreplicatedWrites | undefined {
  const wait = replicaWaitInForce(settings.quota.waitForReplica, settings.redis, settings.redis.commandTimeoutMs);
  if (!wait || !stores.redis || !(stores.quotas instanceof RedisQuotaStore)) return undefined;
  const listener = new UnreplicatedWrites(stores.quotas, stores.redis, logger, metrics);
  if (stores.quotas.waitForReplicas(wait, listener)) {
    if (settings.quota.waitForReplica === undefined) logger.info({ waitForReplica: wait }, 'quota.waitForReplica: the Sentinel default');
    return listener;
  }
  listener.close();
  logger.warn('quota.waitForReplica is ignored on a Redis Cluster');
  return undefined;
}
