import { z } from 'zod';
import { canonicalPath } from '../http/canonical-target.js';
import { upstreamTlsSchema } from '../upstream/upstream-tls.js';
import { corsSchema } from '../policies/cors/cors-schema.js';
import { cacheSchema } from './cache-schema.js';
import { ipRulesSchema } from '../policies/ip-rules/ip-rules-schema.js';
import { headerRulesSchema } from '../policies/header-rules/header-rules-schema.js';
import { validateSchema } from '../policies/validate/validate-schema.js';
import { requireScopesSchema, serviceAnonymousSchema } from '../policies/access/access-schema.js';
import { policiesSchema } from './policies-schema.js';
import { reportedCostSchema } from '../policies/reported-cost/reported-cost-schema.js';
import { limitsSchema } from './limits-schema.js';

// Schema of the `services` section of gateway.yaml: the upstream services the gateway routes to by
// path prefix, each a pool of targets. Hot: reloaded with the file (src/upstream/upstreams.ts).
// A path no service claims goes to the default service, `upstream.url` (named `default`).

export const SERVICE_NAME = /^[a-z0-9_-]{1,32}$/;
/** The name of the service made of `upstream.url`; plans may list it like any other. */
export const DEFAULT_SERVICE = 'default';

const targetUrl = z
  .url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' })
  .refine((u) => !/[?#]/.test(u), {
    message: 'must not carry a query or fragment',
  })
  // Never sent (a target is reached at its origin), yet shown wherever the URL names the target:
  // the admin API, metrics labels, logs.
  .refine((u) => !/^[a-z]+:\/\/[^/]*@/i.test(u), { message: 'must not carry credentials (user:password@)' });

const target = z.union([
  targetUrl,
  z.strictObject({
    url: targetUrl,
    /** Share of the service's requests relative to the other targets' weights. */
    weight: z.number().int().min(1).max(1000).default(1),
  }),
]);

// A path prefix: a canonical path (no dot segments, no `//`, no trailing `/` except the root).
const prefix = z.string().superRefine((value, ctx) => {
  if (!/^\/[A-Za-z0-9\-._~!$&'()*+,;=:@%/]*$/.test(value)) ctx.addIssue({ code: 'custom', message: 'must be a path like /v1/categories' });
  else if (value.length > 1 && value.endsWith('/')) ctx.addIssue({ code: 'custom', message: 'must not end with "/"' });
  else if (/\/\/|\/\.\.?(\/|$)/.test(value)) ctx.addIssue({ code: 'custom', message: 'must be canonical (no "//", "." or ".." segments)' });
  // Matched against canonical paths (canonical-target.ts): a prefix in another form (`%41`, a
  // lower-case escape, an encoded slash) would claim nothing, and its paths would go to `default`.
  else if (canonicalPath(value) !== value)
    ctx.addIssue({ code: 'custom', message: 'must be canonical (unreserved characters unescaped, escapes upper-case, no %2F)' });
});

const ms = (min: number, max: number) => z.number().int().min(min).max(max);

export const serviceSchema = z.strictObject({
  /** 1-32 of a-z 0-9 _ -; logs, metrics, plans and the admin API name the service by it. */
  name: z.string().regex(SERVICE_NAME, 'must be 1-32 of a-z 0-9 _ -'),
  /** Path prefixes on canonical paths, matched whole segments at a time; the longest match wins. */
  paths: z.array(prefix).min(1, 'at least one path prefix'),
  /** true: the matched prefix is removed (/v1/categories/7 reaches the target as /7). */
  stripPrefix: z.boolean().default(false),
  /** Where the service runs: a URL, or { url, weight }. */
  targets: z.array(target).min(1, 'at least one target').max(256),
  /** round-robin: weighted, smooth; least-requests: the less busy of two random targets (by in-flight ÷ weight). */
  balance: z.enum(['round-robin', 'least-requests']).default('round-robin'),
  /** Optional active probe: GET `path` on every target every `intervalMs`. */
  healthCheck: z
    .strictObject({
      path: z.string().regex(/^\/[A-Za-z0-9\-._~!$&'()*+,;=:@%/?]*$/, 'must be a path like /healthz'),
      intervalMs: ms(100, 3_600_000).default(2000),
      /** A probe slower than this failed. */
      timeoutMs: ms(10, 60_000).default(1000),
      /** Consecutive good probes that bring an unhealthy target back. */
      healthyThreshold: z.number().int().min(1).max(100).default(2),
      /** Consecutive failed probes that take a target out. */
      unhealthyThreshold: z.number().int().min(1).max(100).default(2),
    })
    .optional(),
  /** Time a request may take across all its tries, retries and their backoff included; past it 504. */
  timeoutMs: ms(1, 600_000).default(15_000),
  /** Time one try may wait for its response head; 0: the whole timeoutMs. */
  tryTimeoutMs: ms(0, 600_000).default(0),
  retries: z
    .strictObject({
      /** Tries after the first, each to another target when there is one (src/upstream/retry-policy.ts). */
      attempts: z.number().int().min(0).max(5).default(2),
      /** Retries in flight at most this share of the service's requests in flight (and at least 3). */
      budgetPercent: z.number().int().min(0).max(100).default(20),
      /** A POST or PATCH carrying an Idempotency-Key header may be retried like an idempotent method. */
      idempotencyKey: z.boolean().default(false),
    })
    .prefault({}),
  ejection: z
    .strictObject({
      /** Consecutive failures (connect errors, resets, timeouts, 5xx) that eject a target. */
      consecutiveFailures: z.number().int().min(1).max(1000).default(5),
      /** First ejection's length; each further one doubles it, up to maxMs, ±10 % jitter. */
      baseMs: ms(100, 3_600_000).default(10_000),
      maxMs: ms(100, 3_600_000).default(300_000),
      /** Hard cap on the targets ejected at once, rounded down (one target of one: never ejected under 100). */
      maxEjectedPercent: z.number().int().min(0).max(100).default(50),
    })
    .prefault({}),
  /** No target in rotation: `fail` answers 503 upstream_unavailable at once; `all` tries every target anyway. */
  panic: z.enum(['fail', 'all']).default('fail'),
  /** A target back in rotation takes a growing share of traffic over this long (0: at once). */
  slowStartMs: ms(0, 600_000).default(0),
  /** Keep-alive connections per target. */
  maxSockets: z.number().int().min(1).max(65536).default(512),
  /** For https:// targets: a private CA, a client certificate (mTLS), the server name (src/upstream/upstream-tls.ts). */
  tls: upstreamTlsSchema,
  /** This service's own CORS rules, replacing gateway.yaml's top-level `cors:` for its paths. */
  cors: corsSchema.optional(),
  /** A response cache for the service's GET and HEAD (docs/cache.md); absent: nothing is stored. */
  cache: cacheSchema.optional(),
  /** Networks refused (`deny`) or the only ones admitted (`allow`) on this service's paths (docs/policies.md). */
  ipRules: ipRulesSchema,
  /** Fields set on or removed from the request the targets receive, after the policy decision (docs/policies.md). */
  requestHeaders: headerRulesSchema,
  /** Fields set on or removed from the target's response as it is relayed (never the gateway's own Error bodies). */
  responseHeaders: headerRulesSchema,
  /** Requests checked against an OpenAPI document before they are forwarded (docs/policies.md). */
  validate: validateSchema,
  /** Per method, the scopes a key or token must hold on this service's paths; else 403 insufficient_scope. */
  requireScopes: requireScopesSchema.optional(),
  /** Admit requests without a credential, limited per client address on this plan (docs/policies.md). */
  anonymous: serviceAnonymousSchema.optional(),
  /** Limit rules on this service's paths, after the global ones; names unique in the file (docs/policies.md). */
  limits: limitsSchema,
  /** The user's own policies on this service's paths, after the global ones (docs/plugins.md). */
  policies: policiesSchema,
  /** The cost the upstream reports for each request (docs/upstream.md); a `routes.costs` rule of the path wins. */
  cost: reportedCostSchema.optional(),
});

export type ServiceConfig = z.infer<typeof serviceSchema>;
export type TargetConfig = { url: string; weight: number };

/** Targets as { url, weight } whichever way they were written. */
export function targetsOf(service: ServiceConfig): TargetConfig[] {
  return service.targets.map((t) => (typeof t === 'string' ? { url: t, weight: 1 } : t));
}

/** Every service's mistakes that span entries: duplicate names, a prefix claimed twice, a target listed twice. */
function crossChecked(services: ServiceConfig[], ctx: z.RefinementCtx): void {
  const names = new Map<string, number>();
  const prefixes = new Map<string, string>();
  services.forEach((service, i) => {
    if (service.name === DEFAULT_SERVICE)
      ctx.addIssue({
        code: 'custom',
        path: [i, 'name'],
        message: `"${DEFAULT_SERVICE}" is the service of upstream.url; pick another name`,
      });
    if (names.has(service.name)) ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `duplicate service name "${service.name}"` });
    names.set(service.name, i);
    service.paths.forEach((p, j) => {
      // Prefixes match whatever the case (upstream/service-routes.ts): /v1/Store and /v1/store are one.
      const owner = prefixes.get(p.toLowerCase());
      if (owner !== undefined)
        ctx.addIssue({ code: 'custom', path: [i, 'paths', j], message: `"${p}" is already claimed by service "${owner}"` });
      else prefixes.set(p.toLowerCase(), service.name);
    });
    const urls = new Set<string>();
    targetsOf(service).forEach((t, j) => {
      const normal = new URL(t.url).href;
      if (urls.has(normal)) ctx.addIssue({ code: 'custom', path: [i, 'targets', j], message: `target ${t.url} is listed twice` });
      urls.add(normal);
    });
    if (service.ejection.maxMs < service.ejection.baseMs)
      ctx.addIssue({ code: 'custom', path: [i, 'ejection', 'maxMs'], message: 'cannot be lower than baseMs' });
  });
}

export const servicesSchema = z.array(serviceSchema).max(1000).default([]).superRefine(crossChecked);
