import { z } from 'zod';
import { isTimeZone } from './calendar-fields.js';
import { assertionSchema } from './assertion-schema.js';
import { consoleSchema } from './console-schema.js';
import { jwtSchema } from './jwt-schema.js';
import { routesSchema } from './routes-schema.js';
import { servicesSchema } from './services-schema.js';
import { corsSchema } from '../policies/cors/cors-schema.js';
import { upstreamTlsSchema } from '../upstream/upstream-tls.js';
import { nodeEntryError } from './redis-target.js';
import { cidrListSchema, ipRulesSchema } from '../policies/ip-rules/ip-rules-schema.js';
import { maxBodyBytesSchema } from '../policies/validate/validate-schema.js';
import { policiesSchema } from './policies-schema.js';
import { duplicateLimitNames, limitsSchema } from './limits-schema.js';

/** quota.usage.retentionDays' default: a year and a month, for invoices and their disputes. */
export const DEFAULT_USAGE_RETENTION_DAYS = 400;

// Schema of config/gateway.yaml. Environment variables override some fields (see settings.ts).

const port = z.number().int().min(0).max(65535);
const host = z.string().min(1);
const ms = (min: number, max: number) => z.number().int().min(min).max(max);
/** Where the gateway answers something itself; "" turns that answer off. */
const servedPath = (example: string) =>
  z.union([z.literal(''), z.string().regex(/^\/[A-Za-z0-9\-._~/]*$/, `must be a path like ${example}`)]).default(example);
const redisNode = z.string().superRefine((entry, ctx) => {
  const error = nodeEntryError(entry);
  if (error) ctx.addIssue({ code: 'custom', message: `"${entry.replace(/\/\/[^@]*@/, '//***@')}": ${error}` });
});

/** One Redis per deployment: a URL, Cluster nodes or Sentinels, not two of them. */
function oneRedisTopology(redis: { url: string; clusterNodes: string[]; sentinels: string[] }, ctx: z.RefinementCtx): void {
  const set = [redis.url && 'url', redis.clusterNodes.length && 'clusterNodes', redis.sentinels.length && 'sentinels'].filter(Boolean);
  if (set.length > 1)
    ctx.addIssue({
      code: 'custom',
      path: [set[1] as string],
      message: `set only one of url, clusterNodes, sentinels (${set.join(' and ')} are set)`,
    });
}

/** A PEM file: relative to the config directory, or absolute. */
const pemPath = z.string().min(1);

/**
 * TLS on the public listener (src/http/tls-context.ts): a certificate chain and its key, reloaded
 * when either file changes or on SIGHUP; more pairs chosen by the client's SNI server name.
 * GATEWAY_TLS_CERT / GATEWAY_TLS_KEY override `cert` and `key`, so that both or neither are set is
 * checked once the environment is laid over the file (settings.ts), not here.
 */
const tlsSchema = z
  .strictObject({
    /** PEM certificate chain (leaf first); "" with `key` "": no TLS. */
    cert: z.string().default(''),
    /** PEM private key of `cert`. */
    key: z.string().default(''),
    /** More certificates, chosen by the server name the client asks for (SNI); `cert` serves every other name. */
    sni: z
      .array(
        z.strictObject({
          /** A host name, or `*.example.com` for one level of subdomains. */
          serverName: z
            .string()
            .regex(/^(\*\.)?[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*$/, 'must be a host name like api.example.com or *.example.com'),
          cert: pemPath,
          key: pemPath,
        }),
      )
      .default([]),
  })
  .prefault({});

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

export const gatewayFileSchema = z
  .strictObject({
    log: z
      .strictObject({
        /** Least severe level written; LOG_LEVEL overrides. */
        level: z.enum(LOG_LEVELS).default('info'),
        /** `auto`: coloured lines for a person when stdout is a terminal, JSON otherwise; LOG_FORMAT overrides. */
        format: z.enum(['auto', 'json', 'pretty']).default('auto'),
      })
      .prefault({}),
    gateway: z
      .strictObject({
        host: host.default('0.0.0.0'),
        port: port.default(8080),
        /** Seconds in-flight requests get to finish after SIGTERM before the process exits anyway. */
        shutdownGraceSeconds: z.number().int().min(0).max(300).default(10),
        /**
         * Seconds between SIGTERM and closing the listener, during which it keeps serving, /readyz
         * answers 503 and responses carry `Connection: close`: the time a load balancer (Kubernetes
         * removing the pod from its endpoints) needs to stop sending here. 0: close at once.
         */
        drainDelaySeconds: z.number().int().min(0).max(300).default(0),
        /**
         * Proxies in front that append the client's address to X-Forwarded-For (a load balancer: 1).
         * Per-address limits then count that address. 0: the socket's peer is the client.
         */
        trustProxyHops: z.number().int().min(0).max(10).default(0),
        /**
         * Instead of a count: the networks of the proxies in front (`[10.0.0.0/8]`). A request from
         * an address outside them is its own client, whatever its X-Forwarded-For says; through them,
         * the right-most X-Forwarded-For entry outside them is (src/http/proxy-trust.ts).
         */
        trustedProxies: cidrListSchema.default([]),
        /** A client must send its whole request head within this time (slowloris); else 408. */
        headersTimeoutMs: z.number().int().min(100).max(600_000).default(10_000),
        /** A client must send its whole request, body included, within this time; else 408. */
        requestTimeoutMs: z.number().int().min(100).max(3_600_000).default(60_000),
        /**
         * Open connections one client address may hold (the TCP peer, also behind a load balancer,
         * so keep 0 there); over it a new connection is closed at once. 0: no cap.
         */
        maxConnectionsPerAddress: z.number().int().min(0).max(1_000_000).default(0),
        /** A WebSocket tunnel with no byte either way for this long is closed (nginx's proxy_read_timeout is 60 s). */
        webSocketIdleTimeoutMs: z.number().int().min(1000).max(86_400_000).default(60_000),
        /** TLS on this listener (HTTPS, and HTTP/2 by ALPN); off by default (plain HTTP behind a balancer). */
        tls: tlsSchema,
      })
      .refine((g) => g.trustProxyHops === 0 || g.trustedProxies.length === 0, {
        message:
          'set trustedProxies or trustProxyHops (or TRUST_PROXY_HOPS), not both: trustedProxies says which peers are proxies, hops only how many',
        path: ['trustedProxies'],
      })
      .prefault({}),
    admin: z
      .strictObject({
        host: host.default('127.0.0.1'),
        port: port.default(9090),
        /** Admin changes kept in the audit (a capped Redis stream); the oldest go first. */
        auditMaxEntries: z.number().int().min(100).max(10_000_000).default(100_000),
      })
      .prefault({}),
    backend: z
      .strictObject({
        host: host.default('127.0.0.1'),
        port: port.default(8081),
        /** Largest request body the category service reads, in bytes; larger ones get 413. */
        maxBodyBytes: maxBodyBytesSchema,
      })
      .prefault({}),
    upstream: z
      .strictObject({
        url: z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' }).default('http://127.0.0.1:8081'),
        /** Time the upstream gets to start answering; past it the client gets 504. */
        timeoutMs: ms(1, 600_000).default(15_000),
        /** Keep-alive sockets kept open to the upstream. */
        maxSockets: z.number().int().min(1).max(65536).default(512),
        /** For an https:// url: a private CA, a client certificate (mTLS), the server name (src/upstream/upstream-tls.ts). */
        tls: upstreamTlsSchema,
      })
      .prefault({}),
    redis: z
      .strictObject({
        /** Empty: the embedded in-memory store (one process only). REDIS_URL overrides. */
        url: z.string().default(''),
        /** Redis Cluster seed nodes (host:port); set instead of url. REDIS_CLUSTER_NODES overrides. */
        clusterNodes: z.array(redisNode).default([]),
        /** Sentinels (host:port) watching the master `sentinelMaster`; set instead of url. REDIS_SENTINELS overrides. */
        sentinels: z.array(redisNode).default([]),
        sentinelMaster: z.string().min(1).default('mymaster'),
        /** Per-command timeout: a slow Redis must never stall requests. */
        commandTimeoutMs: ms(10, 10_000).default(250),
      })
      .superRefine(oneRedisTopology)
      .prefault({}),
    quota: z
      .strictObject({
        /**
         * What quotas do while Redis is unreachable: `local` (each replica enforces its share of
         * every limit in memory and marks responses degraded), `open` (admit everything) or
         * `closed` (503 rate_limit_store_unavailable).
         */
        onRedisFailure: z.enum(['local', 'open', 'closed']).default('local'),
        /**
         * The time zone (IANA name) whose days the day window counts and whose calendar months the
         * month window counts (a key's billing anchor moves its month's first day). Restart to change.
         */
        timeZone: z.string().refine(isTimeZone, 'must be an IANA time zone name, e.g. UTC or Europe/Berlin').default('UTC'),
        /** Gateway replicas sharing the load; in `local` mode each enforces 1/replicas of a limit. */
        replicas: z.number().int().min(1).max(1000).default(1),
        /**
         * Most quota decisions one replica waits on Redis for at once; beyond it a request is shed
         * with 503 gateway_overloaded and Retry-After (never decided locally: a busy gateway is not a
         * dead Redis).
         */
        maxPendingDecisions: z.number().int().min(1).max(1_000_000).default(10_000),
        /**
         * Quota leases (docs/quota-leases.md): a hot key far from its limits reserves blocks of units
         * in Redis and is admitted without a round trip; never more than the limit per window.
         */
        leases: z
          .strictObject({
            /**
             * On by default: never over-admits, and a request that does not fit while units are out
             * on leases recalls them first, so admission at the limit is exact for any burst
             * (docs/quota-leases.md). Off: every request is one Redis round trip.
             */
            enabled: z.boolean().default(true),
            /** Longest a lease lives without renewal; unused units go back to Redis after it. */
            leaseMs: z.number().int().min(50).max(60_000).default(1000),
            /** A key takes leases once this replica sees this many units of it in a second. */
            hotPerSecond: z.number().int().min(1).max(1_000_000).default(50),
            /** Smallest block worth a lease; fewer units left per replica: every request asks Redis. */
            minBlock: z.number().int().min(1).max(1_000_000).default(8),
            maxBlock: z.number().int().min(1).max(1_000_000).default(2000),
            /** A block is at most the units left / (spread × replicas). */
            spread: z.number().int().min(1).max(1000).default(4),
            /**
             * Keys below hotPerSecond that call steadily (many warm keys, the common case) take
             * fixed-window leases that live until their minute's end: two background commands a
             * minute instead of a decision per request (docs/quota-leases.md, warm keys).
             */
            warmKeys: z.boolean().default(true),
          })
          .refine((l) => l.minBlock <= l.maxBlock, { message: 'minBlock cannot exceed maxBlock', path: ['minBlock'] })
          .prefault({}),
        /**
         * A single Redis or Sentinel master: after each turn's quota decisions (and each lease grant)
         * a WAIT for this many replicas, up to timeoutMs, before the answers (docs/operations.md,
         * "Replicated decisions"); false: none. Absent: { replicas: 1, timeoutMs: 50 } on Sentinel,
         * whose failover would otherwise lose the writes a demoted master had not sent yet
         * (replica-wait-default.ts), none on one server. Ignored on a Cluster.
         */
        waitForReplica: z
          .union([
            z.literal(false),
            z.strictObject({
              replicas: z.number().int().min(1).max(16),
              timeoutMs: ms(1, 10_000),
            }),
          ])
          .optional(),
        /** Usage for invoicing (docs/operations.md): per consumer and hour, written by the quota step. */
        usage: z
          .strictObject({
            /** Days each day's usage is kept in Redis after it began; 0 keeps none. Restart to change. */
            retentionDays: z.number().int().min(0).max(3660).default(DEFAULT_USAGE_RETENTION_DAYS),
          })
          .prefault({}),
      })
      .prefault({}),
    unauthenticated: z
      .strictObject({
        /** Failed authentications allowed per client address per minute before 429s (anti-guessing). */
        perMinute: z.number().int().min(1).max(1_000_000).default(60),
      })
      .prefault({}),
    keyCache: z
      .strictObject({
        /** Seconds a validated key record is served from memory; revocations are pushed at once anyway. */
        ttlSeconds: z.number().int().min(0).max(3600).default(30),
        /** Seconds a key validated before Redis became unreachable stays usable from memory. */
        staleSeconds: z.number().int().min(0).max(86_400).default(300),
        /** Most key records held per process (bounded memory under millions of keys). */
        maxEntries: z.number().int().min(1).max(10_000_000).default(100_000),
      })
      .prefault({}),
    /** Networks refused on every path before anything else is done (docs/policies.md); hot, like `services`. */
    ipRules: ipRulesSchema,
    /** Upstream services routed by path prefix, each a pool of targets; hot, like `routes`. */
    services: servicesSchema,
    /** Limit rules keyed by request attributes, on every service's paths (docs/policies.md); hot, like `services`. */
    limits: limitsSchema,
    /**
     * Which web origins a browser may call the API from (docs/cors-and-websockets.md); a service's
     * own `cors:` replaces it for its paths. Absent: no CORS answer at all. Hot, like `services`.
     */
    cors: corsSchema.optional(),
    /** The user's own policies on every service's paths (docs/plugins.md): code loads at start, options are hot. */
    policies: policiesSchema,
    /** Per-route rules (deprecation and sunset); hot: reloaded with the file, unlike the rest. */
    routes: routesSchema.prefault({}),
    /** Identity providers whose JWT access tokens are admitted besides API keys; absent: keys only. Hot. */
    jwt: jwtSchema.optional(),
    /** The operator console's sign-in with the team's OpenID provider (docs/admin.md); hot. */
    console: consoleSchema,
    /** The signed identity assertion for the upstream; the secret comes from the environment. */
    assertion: assertionSchema.prefault({}),
    /** The public OpenAPI document, served as JSON before authentication and quota (read at start). */
    openapi: z
      .strictObject({
        /** Where it is served; "" turns it off (the path is then proxied like any other). */
        path: servedPath('/v1/openapi.json'),
        /** A YAML or JSON OpenAPI file; "" is the openapi.yaml shipped with tollgate. Relative to the config directory. */
        file: z.string().default(''),
      })
      .prefault({}),
    /**
     * WebSocket tickets for browsers (docs/cors-and-websockets.md): POST here with a key returns a
     * single-use ticket a WebSocket handshake may carry instead of Authorization, for 30 seconds.
     */
    webSocketTickets: z
      .strictObject({
        /** Where they are minted; "" turns tickets off (the path is then proxied like any other). */
        path: servedPath('/v1/ws-tickets'),
      })
      .prefault({}),
    /** Self-service usage: a key's own quotas and use, answered by the gateway without counting against them. */
    usage: z
      .strictObject({
        /** Where it is served; "" turns it off (the path is then proxied like any other). */
        path: servedPath('/v1/usage'),
      })
      .prefault({}),
  })
  .superRefine((file, ctx) => duplicateLimitNames(file.limits, file.services, ctx))
  .superRefine((file, ctx) => waitWithinCommandTimeout(file.quota.waitForReplica, file.redis.commandTimeoutMs, ctx));

export type GatewayFile = z.infer<typeof gatewayFileSchema>;

/**
 * The WAIT runs under the command timeout (on a connection of its own: store/redis/replica-acks.ts):
 * one at least as long would be cut by it, a failed command instead of a count of acknowledgements.
 */
function waitWithinCommandTimeout(wait: { timeoutMs: number } | false | undefined, commandTimeoutMs: number, ctx: z.RefinementCtx): void {
  if (wait && wait.timeoutMs >= commandTimeoutMs) {
    ctx.addIssue({
      code: 'custom',
      path: ['quota', 'waitForReplica', 'timeoutMs'],
      message: `must be less than redis.commandTimeoutMs (${commandTimeoutMs})`,
    });
  }
}
