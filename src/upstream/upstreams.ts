import { DEFAULT_SERVICE, serviceSchema, type ServiceConfig } from '../config/services-schema.js';
import type { Logger } from '../observability/log.js';
import type { UpstreamTls } from './upstream-tls.js';
import { HealthProbes } from './health-probe.js';
import { Service, type ServiceEvents } from './service.js';
import { ServiceRoutes, type Route } from './service-routes.js';
import type { Target } from './target.js';

export interface DefaultUpstream {
  url: string;
  timeoutMs: number;
  maxSockets: number;
  tls?: UpstreamTls;
}

/**
 * Every service the gateway routes to: the configured ones and `default` (upstream.url, which
 * takes every path no service claims). A reload builds a new table and swaps it in one step: a
 * request routed before the swap finishes on the targets it was given; targets that stay (same
 * URL) keep their pool, load and health; removed ones are drained (their pool closes once its
 * requests in flight are done).
 */
export class Upstreams {
  private routes: ServiceRoutes;
  private services: Service[];
  readonly fallback: Service;
  private readonly probes: HealthProbes;

  constructor(
    defaultUpstream: DefaultUpstream,
    configs: readonly ServiceConfig[],
    private readonly events: ServiceEvents,
    private readonly logger: Logger,
    private readonly now: () => number = Date.now,
  ) {
    this.fallback = new Service(defaultServiceConfig(defaultUpstream), now, events);
    this.services = configs.map((c) => new Service(c, now, events));
    this.routes = new ServiceRoutes(this.services, this.fallback);
    this.probes = new HealthProbes(logger);
    this.probes.watch(this.all());
  }

  route(target: string): Route {
    return this.routes.route(target);
  }

  /** The default service first, then the configured ones in file order. */
  all(): Service[] {
    return [this.fallback, ...this.services];
  }

  byName(name: string): Service | undefined {
    return this.all().find((s) => s.name === name);
  }

  /** A reloaded `services` section: swapped in at once, targets matched by URL within a service. */
  apply(configs: readonly ServiceConfig[]): void {
    const before = new Map(this.services.map((s) => [s.name, s]));
    const next = configs.map((config) => {
      const old = before.get(config.name);
      const reuse = new Map<string, Target>(old?.targets.map((t) => [t.url, t]) ?? []);
      const service = new Service(config, this.now, this.events, reuse);
      // Requests in flight keep counting in the service's load, and go on in the new one.
      old?.replaceWith(service);
      return service;
    });
    const kept = new Set(next.flatMap((s) => s.targets));
    const removed = this.services.flatMap((s) => s.targets).filter((t) => !kept.has(t));
    this.services = next;
    this.routes = new ServiceRoutes(next, this.fallback);
    this.probes.watch(this.all());
    for (const target of removed) target.drain();
    this.logger.info({ services: next.map((s) => s.name), removedTargets: removed.map((t) => t.url) }, 'services reloaded');
  }

  /** For /readyz: each service's targets in rotation out of all. */
  summary(): Record<string, { inRotation: number; targets: number }> {
    const out: Record<string, { inRotation: number; targets: number }> = {};
    const nowMs = this.now();
    for (const service of this.all()) {
      out[service.name] = { inRotation: service.targets.filter((t) => t.health.inRotation(nowMs)).length, targets: service.targets.length };
    }
    return out;
  }

  /** For the admin API: every service with its targets' load and standing. */
  describe() {
    const nowMs = this.now();
    return this.all().map((service) => ({
      name: service.name,
      paths: service.config.paths,
      stripPrefix: service.config.stripPrefix,
      balance: service.config.balance,
      // The edge rules of this service as configured (docs/policies.md); null when unset.
      ipRules: service.config.ipRules ?? null,
      requestHeaders: shownHeaderRules(service.config.requestHeaders),
      responseHeaders: shownHeaderRules(service.config.responseHeaders),
      validate: service.config.validate ?? null,
      // Who may call it: the scopes required per method, anonymous callers' plan (null: none).
      requireScopes: service.config.requireScopes ?? null,
      anonymous: service.config.anonymous ?? null,
      // Its limit rules as configured, after the global ones (docs/policies.md).
      limits: service.config.limits,
      inFlight: service.inFlight,
      retriesInFlight: service.retriesInFlight,
      maxEjected: service.maxEjected(),
      targets: service.targets.map((t) => ({
        url: t.url,
        weight: t.weight,
        inFlight: t.inFlight,
        inRotation: t.health.inRotation(nowMs),
        ejected: t.health.ejected(nowMs),
        ejectedUntil: t.health.readmitAtMs ? new Date(t.health.readmitAtMs).toISOString() : null,
        probeHealthy: t.health.probeHealthy,
        ejections: t.health.ejectionsTotal,
      })),
    }));
  }

  close(): void {
    this.probes.close();
    for (const service of this.all()) for (const target of service.targets) target.pool.destroy().catch(() => undefined);
  }
}

/** Fields whose values are credentials: shown as set, never with their value. */
const CREDENTIAL_FIELDS = new Set(['authorization', 'cookie', 'set-cookie', 'x-api-key']);

/** A service's header rules as the admin API shows them: a credential a rule sets is masked. */
function shownHeaderRules(rules: ServiceConfig['requestHeaders']) {
  if (!rules) return null;
  const set = Object.fromEntries(
    Object.entries(rules.set).map(([name, value]) => [name, CREDENTIAL_FIELDS.has(name.toLowerCase()) ? '***' : value]),
  );
  return { set, remove: rules.remove };
}

/**
 * `upstream.url` as a service of one target: no retry but the one on a new connection after a
 * kept-alive connection was found closed (a retry goes to another target, and there is none), and
 * never ejected (50 % of one target rounds down to none): today's single upstream, unchanged.
 */
function defaultServiceConfig(upstream: DefaultUpstream): ServiceConfig {
  return serviceSchema.parse({
    name: DEFAULT_SERVICE,
    paths: ['/'],
    targets: [upstream.url],
    timeoutMs: upstream.timeoutMs,
    maxSockets: upstream.maxSockets,
    tls: upstream.tls,
  });
}
