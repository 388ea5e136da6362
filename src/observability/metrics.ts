import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { DeferredCounter, PlainHistogram } from './deferred-metrics.js';
import { TrafficCounters } from './traffic.js';

/**
 * The gateway's Prometheus metrics, on their own registry (served on the admin port). Labels are
 * bounded sets: route templates, status codes, plans, decisions. Never a key, a key id or a path
 * as sent. Those counted on every request are plain-map counters moved into prom-client on scrape
 * (deferred-metrics.ts); the rare ones are prom-client's own.
 */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'tollgate_' });
  const metrics = {
    registry,
    requests: new DeferredCounter({
      name: 'tollgate_requests_total',
      help: 'Requests answered, by route template, method and status.',
      labelNames: ['route', 'method', 'status'] as const,
      registers: [registry],
    }),
    requestSeconds: new PlainHistogram({
      name: 'tollgate_request_duration_seconds',
      help: 'Time from request to response end, by route template.',
      labelNames: ['route'] as const,
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    quotaDecisions: new DeferredCounter({
      name: 'tollgate_quota_decisions_total',
      help: 'Quota decisions by plan and result (allowed, limited, banned, unfunded: refused 402 for credits, shadow_limited: refused by a shadow plan and admitted), and where they were taken.',
      labelNames: ['plan', 'decision', 'source'] as const,
      registers: [registry],
    }),
    limitRuleDecisions: new DeferredCounter({
      name: 'tollgate_limit_rule_decisions_total',
      help: 'Limit rules applied to requests, by rule name (never its values) and result: allowed (charged), limited (this rule refused the request), refused_missing (an attribute of `by` was missing under whenMissing: refuse), concurrent (its maxConcurrent slots were all taken).',
      labelNames: ['rule', 'decision'] as const,
      registers: [registry],
    }),
    bans: new Counter({
      name: 'tollgate_bans_total',
      help: 'Bans observed starting (a key crossing ban.afterRejections).',
      labelNames: ['plan'] as const,
      registers: [registry],
    }),
    quotaRecalls: new Counter({
      name: 'tollgate_quota_recalls_total',
      help: 'Requests Redis could not fit while units were out on leases: each waited for their recall, then was decided again (docs/quota-leases.md).',
      registers: [registry],
    }),
    quotaRecallsUnanswered: new Counter({
      name: 'tollgate_quota_recalls_unanswered_total',
      help: 'Recalled requests whose wait ran out before a notice said the leased units were back (a holder killed, cut off, or slower than the bound): decided again without them.',
      registers: [registry],
    }),
    leaseNotices: new Counter({
      name: 'tollgate_quota_lease_notices_total',
      help: "Lease notices received: changes of a key's counts made while some replica may hold a lease of it (docs/quota-leases.md).",
      registers: [registry],
    }),
    authFailures: new Counter({
      name: 'tollgate_auth_failures_total',
      help: 'Requests refused by authentication, by error code.',
      labelNames: ['code'] as const,
      registers: [registry],
    }),
    policyFaults: new Counter({
      name: 'tollgate_policy_faults_total',
      help: 'Hooks of a configured policy that threw or rejected, by policy and phase (each answered 500, or logged after the answer).',
      labelNames: ['policy', 'phase'] as const,
      registers: [registry],
    }),
    policyTimeouts: new Counter({
      name: 'tollgate_policy_timeouts_total',
      help: 'Hooks of a configured policy abandoned past their budgetMs, by policy and phase (each answered 503 policy_timeout).',
      labelNames: ['policy', 'phase'] as const,
      registers: [registry],
    }),
    policyEvents: new Counter({
      name: 'tollgate_policy_events_total',
      help: "Events a configured policy counted itself (ctx.metrics.count), by policy and event (at most 50 events per policy, then 'other').",
      labelNames: ['policy', 'event'] as const,
      registers: [registry],
    }),
    ipRefusals: new Counter({
      name: 'tollgate_ip_refusals_total',
      help: 'Requests refused by IP rules, by rule: global, service:<name>, key (a key used outside its allowedCidrs).',
      labelNames: ['rule'] as const,
      registers: [registry],
    }),
    requestValidations: new Counter({
      name: 'tollgate_request_validations_total',
      help: "Requests checked against their service's OpenAPI document, by service and result: valid, refused, shadow_refused (shadow mode: forwarded).",
      labelNames: ['service', 'result'] as const,
      registers: [registry],
    }),
    redisErrors: new Counter({
      name: 'tollgate_redis_errors_total',
      help: 'Failed Redis operations on the request path, by operation.',
      labelNames: ['operation'] as const,
      registers: [registry],
    }),
    quotaUnreplicated: new Counter({
      name: 'tollgate_quota_unreplicated_total',
      help: 'Quota decisions and lease grants answered although no replica acknowledged their write within quota.waitForReplica.timeoutMs.',
      registers: [registry],
    }),
    redisSeconds: new PlainHistogram({
      name: 'tollgate_redis_duration_seconds',
      help: 'Latency of Redis operations on the request path, by operation.',
      labelNames: ['operation'] as const,
      buckets: [0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5],
      registers: [registry],
    }),
    traceSpansDropped: new Counter({
      name: 'tollgate_trace_spans_dropped_total',
      help: 'Trace spans lost before export: the export queue was full (queue_full), or an export failed or timed out (export_failed).',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    degraded: new Gauge({
      name: 'tollgate_degraded',
      help: '1 while the shared store is unavailable and the gateway runs in its configured failure mode.',
      registers: [registry],
    }),
    slotsInFlight: new Gauge({
      name: 'tollgate_concurrency_slots_in_flight',
      help: 'Concurrency slots (maxConcurrent) this replica holds now: requests and WebSocket tunnels in flight, by plan.',
      labelNames: ['plan'] as const,
      registers: [registry],
    }),
    concurrencyRefusals: new Counter({
      name: 'tollgate_concurrency_refusals_total',
      help: 'Requests refused 429 too_many_concurrent_requests: the windows had room, no concurrency slot was free (maxConcurrent), by plan.',
      labelNames: ['plan'] as const,
      registers: [registry],
    }),
    quotaShed: new Counter({
      name: 'tollgate_quota_shed_total',
      help: "Requests answered 503 gateway_overloaded instead of a quota decision: too many waiting on Redis (pending), or a Redis timeout that was no outage: behind this process's own stalled event loop, or while Redis still answered (timeout).",
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    loopStallSeconds: new Gauge({
      name: 'tollgate_event_loop_stall_seconds',
      help: 'The longest the event loop stalled within the last 10 seconds (the measure that tells a busy gateway from a slow Redis).',
      registers: [registry],
    }),
    costSettlements: new Counter({
      name: 'tollgate_cost_settlements_total',
      help: 'Reservations of a cost the upstream reports, by how their answer ended: reported (settled to the reported cost), capped (reported more than max), none (nothing reported: the reservation charged), invalid (not a whole number of units: the reservation charged), unreached (the gateway answered 502/503/504: given back), broken (ended mid-answer: the reservation stands).',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    costSettleFailures: new Counter({
      name: 'tollgate_cost_settle_failures_total',
      help: 'Settlements of a reported cost given up after their retries (the store unreachable): the reservation stands.',
      registers: [registry],
    }),
    creditShortfallUnits: new Counter({
      name: 'tollgate_credit_shortfall_units_total',
      help: 'Units of reported costs that a credit balance could not pay (never taken below zero): charged to the windows, not to the balance.',
      registers: [registry],
    }),
    degradedUnitsReconciled: new Counter({
      name: 'tollgate_degraded_units_reconciled_total',
      help: 'Units admitted without Redis (local or open mode) and added to Redis once it was back.',
      registers: [registry],
    }),
    upstreamErrors: new Counter({
      name: 'tollgate_upstream_errors_total',
      help: 'Upstream failures by kind (bad_gateway, gateway_timeout, aborted_mid_response, after_response, assertion_rejected).',
      labelNames: ['kind'] as const,
      registers: [registry],
    }),
    upstreamRetries: new Counter({
      name: 'tollgate_upstream_retries_total',
      help: 'Tries after the first, by service and reason (connect, closed, timeout, status; src/upstream/retry-policy.ts).',
      labelNames: ['service', 'reason'] as const,
      registers: [registry],
    }),
    upstreamTries: new DeferredCounter({
      name: 'tollgate_upstream_tries_total',
      help: 'Tries sent to upstream targets, by service, target and outcome (ok, status_5xx, connect, closed, timeout, error).',
      labelNames: ['service', 'target', 'outcome'] as const,
      registers: [registry],
    }),
    upstreamTrySeconds: new PlainHistogram({
      name: 'tollgate_upstream_try_duration_seconds',
      help: 'Time from sending a try to its response head (or its failure), by service and target.',
      labelNames: ['service', 'target'] as const,
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    retryBudgetExhausted: new Counter({
      name: 'tollgate_upstream_retry_budget_exhausted_total',
      help: 'Retries not sent because the service had its budget of retries in flight.',
      labelNames: ['service'] as const,
      registers: [registry],
    }),
    ejections: new Counter({
      name: 'tollgate_upstream_ejections_total',
      help: 'Targets taken out of rotation after consecutive failures, by service and target.',
      labelNames: ['service', 'target'] as const,
      registers: [registry],
    }),
    panics: new Counter({
      name: 'tollgate_upstream_panic_total',
      help: 'Requests that found no target of their service in rotation (answered 503, or sent to all targets under panic: all).',
      labelNames: ['service'] as const,
      registers: [registry],
    }),
    exchangeErrors: new Counter({
      name: 'tollgate_exchange_errors_total',
      help: 'Stream errors after a response started, each ending only its own exchange, by side (client, upstream).',
      labelNames: ['side'] as const,
      registers: [registry],
    }),
    uncaughtErrors: new Counter({
      name: 'tollgate_uncaught_errors_total',
      help: 'Errors no handler caught, logged by the process guard instead of ending the process.',
      registers: [registry],
    }),
    assertionRejections: new Counter({
      name: 'tollgate_upstream_assertion_rejections_total',
      help: 'Upstream 401 invalid_gateway_assertion answers (gateway and backend secrets differ), answered 502.',
      registers: [registry],
    }),
    /** Not Prometheus: the console's per-second and per-key view of this replica (traffic.ts). */
    cacheLookups: new DeferredCounter({
      name: 'tollgate_cache_lookups_total',
      help: 'Requests to cached services by what the cache did: hit, stale_hit (served stale on an upstream error), revalidated (304), miss, bypass (not a cacheable request, or the store failed).',
      labelNames: ['service', 'result'] as const,
      registers: [registry],
    }),
    cacheStores: new Counter({
      name: 'tollgate_cache_stores_total',
      help: 'Responses stored (or refreshed by a 304), by service.',
      labelNames: ['service'] as const,
      registers: [registry],
    }),
    cacheEvictions: new Counter({
      name: 'tollgate_cache_evictions_total',
      help: 'Entries the memory store pushed out to stay within maxBytes, by service.',
      labelNames: ['service'] as const,
      registers: [registry],
    }),
    cacheBytes: new Gauge({
      name: 'tollgate_cache_bytes',
      help: 'Bytes held by the memory store, by service (this replica).',
      labelNames: ['service'] as const,
      registers: [registry],
    }),
    cacheCoalescedWaits: new Counter({
      name: 'tollgate_cache_coalesced_waits_total',
      help: 'Requests that waited for another request for the same URL instead of going upstream, by service and outcome (shared: answered from its response; alone: went upstream after all).',
      labelNames: ['service', 'outcome'] as const,
      registers: [registry],
    }),
    cacheStoreErrors: new Counter({
      name: 'tollgate_cache_store_errors_total',
      help: 'Failed operations on the cache store (the request bypassed the cache), by operation.',
      labelNames: ['operation'] as const,
      registers: [registry],
    }),
    traffic: new TrafficCounters(),
  };
  return metrics;
}

export type Metrics = ReturnType<typeof createMetrics>;
