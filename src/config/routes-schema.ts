import { z } from 'zod';
import { HTTP_METHODS, routeAnonymousSchema } from '../policies/access/access-schema.js';
import { scopeListSchema } from '../policies/access/scope.js';
import { reportedCostSchema, type ReportedCost } from '../policies/reported-cost/reported-cost-schema.js';

// Schema of the `routes` section of gateway.yaml: per-route rules applied after the quota check.
// The dates and links are for clients (RFC 9745 Deprecation, RFC 8594 Sunset, RFC 8288 Link);
// src/gateway/route-rules.ts compiles them once per load.

/** Methods a rule may name. A GET rule also covers HEAD (RFC 9110 §9.3.2: HEAD is GET without a body). */
export const RULE_METHODS = HTTP_METHODS;

// A literal path segment: RFC 3986 `pchar`s only (no braces, no `?` or `#`).
const LITERAL_SEGMENT = /^[A-Za-z0-9\-._~!$&'()*+,;=:@%]+$/;
// A parameter is a whole segment, `{name}`, like an OpenAPI path template.
const PARAM_SEGMENT = /^\{([A-Za-z_][A-Za-z0-9_]*)\}$/;

/** Why a path pattern is malformed, or null when it is fine. Shared with the compiler. */
export function patternProblem(pattern: string): string | null {
  if (!pattern.startsWith('/')) return 'must start with "/" (the full request path, e.g. /v1/pets/{petId})';
  if (pattern.length > 512) return 'must be at most 512 characters';
  if (pattern === '/') return null;
  const names = new Set<string>();
  for (const segment of pattern.slice(1).split('/')) {
    if (segment === '') return 'must not contain an empty segment ("//" or a trailing "/")';
    const param = PARAM_SEGMENT.exec(segment);
    if (param) {
      if (names.has(param[1]!)) return `names the parameter {${param[1]}} twice`;
      names.add(param[1]!);
    } else if (!LITERAL_SEGMENT.test(segment)) {
      return `segment "${segment}" is neither literal path characters nor a whole-segment {parameter}`;
    }
  }
  return null;
}

/** A rule's path pattern: the full request path with `{param}` segments. */
const rulePath = z.string().superRefine((value, ctx) => {
  const problem = patternProblem(value);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});

const isoDateTime = z.iso.datetime({
  offset: true,
  error: (issue) =>
    issue.input === undefined ? 'is required' : 'must be an ISO 8601 date-time with a time zone, e.g. 2027-06-30T00:00:00Z',
});
const docUrl = z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' });

export const deprecationRuleSchema = z
  .strictObject({
    /** HTTP method, upper case. */
    method: z.enum(RULE_METHODS),
    /** Full request path with `{param}` segments, e.g. /v1/pets/{petId}; matched exactly, query ignored. */
    path: rulePath,
    /** When the route is (or will be) deprecated: `Deprecation: @<unix seconds>` (RFC 9745). */
    deprecatedAt: isoDateTime,
    /** When the route goes away: `Sunset: <IMF-fixdate>` (RFC 8594). Never before deprecatedAt. */
    sunsetAt: isoDateTime,
    /** Human-readable deprecation notice: `Link: <url>; rel="deprecation"; type="text/html"`. */
    link: docUrl.optional(),
    /** Sunset policy or migration page: `Link: <url>; rel="sunset"`. */
    sunsetLink: docUrl.optional(),
    /** After sunsetAt, answer 410 route_sunset instead of proxying. */
    goneAfterSunset: z.boolean().default(false),
  })
  // Not `>=`: a date that does not parse is its own mistake (NaN), not also this one.
  .refine((rule) => !(Date.parse(rule.sunsetAt) < Date.parse(rule.deprecatedAt)), {
    path: ['sunsetAt'],
    message: 'must not be earlier than deprecatedAt',
  });

/** Most units one request may cost: more than any sane plan's minute, few enough to catch a typo. */
export const MAX_ROUTE_COST = 10_000;

export const costRuleSchema = z.strictObject({
  /** HTTP method, upper case; a GET rule also covers HEAD. */
  method: z.enum(RULE_METHODS),
  /** Full request path with `{param}` segments, as for deprecations. */
  path: rulePath,
  /**
   * Units of every quota window a matching request consumes (a request matching no rule costs 1),
   * or the cost the upstream reports, `{ fromResponseHeader, fromTrailer, reserve, max, forwardHeader }`
   * (src/policies/reported-cost/reported-cost-schema.ts).
   */
  cost: routeCost(),
});

/** A whole number of units, or an object read as a reported cost: each form keeps its own messages (a union would say only "Invalid input"). */
function routeCost() {
  const fixed = z
    .number({ error: 'must be a number' })
    .int('must be a whole number')
    .min(1, 'must be at least 1')
    .max(MAX_ROUTE_COST, `must be at most ${MAX_ROUTE_COST}`);
  return z.unknown().transform((value, ctx): number | ReportedCost => {
    const parsed = typeof value === 'object' && value !== null ? reportedCostSchema.safeParse(value) : fixed.safeParse(value);
    if (parsed.success) return parsed.data;
    for (const issue of parsed.error.issues) ctx.addIssue({ ...issue });
    return z.NEVER;
  });
}

/** Who may call one route: scopes required (besides its service's) and/or anonymous callers admitted. */
export const accessRuleSchema = z
  .strictObject({
    /** HTTP method, upper case; a GET rule also covers HEAD. */
    method: z.enum(RULE_METHODS),
    /** Full request path with `{param}` segments, as for deprecations. */
    path: rulePath,
    /** Scopes a key or token must hold, every one, in addition to the service's; else 403 insufficient_scope. */
    requireScopes: scopeListSchema.optional(),
    /** Admit requests without a credential, limited per client address on this plan. */
    anonymous: routeAnonymousSchema.optional(),
  })
  .refine((rule) => rule.requireScopes !== undefined || rule.anonymous !== undefined, {
    message: 'give requireScopes, anonymous or both',
  });

/** Two rules of one list for the same method and path (whatever their parameter names) are a mistake. */
function noDuplicates(
  list: 'deprecations' | 'costs' | 'access',
  rules: ReadonlyArray<{ method: string; path: string }>,
  ctx: z.RefinementCtx,
): void {
  const seen = new Map<string, number>();
  rules.forEach((rule, index) => {
    // /v1/pets/{id} and /v1/pets/{petId} match the same requests.
    const key = `${rule.method} ${rule.path.replace(/\{[^}]*\}/g, '{}')}`;
    const first = seen.get(key);
    if (first !== undefined) {
      ctx.addIssue({ code: 'custom', path: [list, index, 'path'], message: `matches the same requests as ${list}.${first}` });
    } else {
      seen.set(key, index);
    }
  });
}

export const routesSchema = z
  .strictObject({
    /** Deprecated routes; the first rule that matches a request applies. */
    deprecations: z.array(deprecationRuleSchema).max(1000).default([]),
    /** Routes whose requests cost more than one quota unit; the first rule that matches applies. */
    costs: z.array(costRuleSchema).max(1000).default([]),
    /** Scopes and anonymous callers per route (docs/policies.md); the first rule that matches applies. */
    access: z.array(accessRuleSchema).max(1000).default([]),
  })
  .superRefine((routes, ctx) => {
    noDuplicates('deprecations', routes.deprecations, ctx);
    noDuplicates('costs', routes.costs, ctx);
    noDuplicates('access', routes.access, ctx);
  });

export type DeprecationRule = z.output<typeof deprecationRuleSchema>;
export type CostRule = z.output<typeof costRuleSchema>;
export type AccessRule = z.output<typeof accessRuleSchema>;
