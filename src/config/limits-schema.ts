import { z } from 'zod';
import { patternProblem } from './routes-schema.js';
import { HTTP_METHODS } from '../policies/access/access-schema.js';

// Schema of `limits` (top level of gateway.yaml, and per service): limit rules keyed by request
// attributes (docs/policies.md, "Limit rules"). Every rule a request matches is decided with the
// plan's windows in one atomic quota step (src/store/quota-store.ts consumeRules). Hot with the file.

/** A rule's name: in Redis keys, RateLimit-Policy and metrics labels, so short and plain. */
export const LIMIT_NAME = /^[a-z0-9][a-z0-9_-]{0,47}$/;

/** Header and claim names in `by`: an HTTP token (header names are matched whatever their case). */
const TOKEN = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$/;

/** What a rule counts by: each part of `by` is one of these. */
export type ByPart =
  | { kind: 'consumer.id' | 'consumer.plan' | 'consumer.owner' | 'client.address' }
  | { kind: 'client.prefix'; v4Bits: number; v6Bits: number }
  | { kind: 'header' | 'claim' | 'path'; name: string };

/** Parses one `by` entry; a string is the mistake, said for check-config. */
export function parseByPart(text: string): ByPart | string {
  if (text === 'consumer.id' || text === 'consumer.plan' || text === 'consumer.owner' || text === 'client.address') return { kind: text };
  const prefix = /^client\.prefix\/(\d{1,2})(?:\/(\d{1,3}))?$/.exec(text);
  if (prefix) {
    const v4Bits = Number(prefix[1]);
    const v6Bits = prefix[2] === undefined ? 64 : Number(prefix[2]);
    if (v4Bits < 1 || v4Bits > 32) return 'client.prefix/N: N (IPv4 bits) must be 1 to 32';
    if (v6Bits < 1 || v6Bits > 128) return 'client.prefix/N/M: M (IPv6 bits) must be 1 to 128';
    return { kind: 'client.prefix', v4Bits, v6Bits };
  }
  const named = /^(header|claim|path):(.*)$/.exec(text);
  if (named) {
    const name = named[2]!;
    if (!TOKEN.test(name)) return `${named[1]}:<name>: the name must be 1-64 token characters`;
    return { kind: named[1] as 'header' | 'claim' | 'path', name: named[1] === 'header' ? name.toLowerCase() : name };
  }
  return 'must be consumer.id, consumer.plan, consumer.owner, client.address, client.prefix/N[/M], header:<name>, claim:<name> or path:<param>';
}

const byPart = z.string().superRefine((value, ctx) => {
  const parsed = parseByPart(value);
  if (typeof parsed === 'string') ctx.addIssue({ code: 'custom', message: `"${value.slice(0, 80)}": ${parsed}` });
});

const limit = z.number().int().min(1).max(1_000_000_000);

/** The windows a rule may be written with, and their lengths. */
export const RULE_WINDOWS = { perSecond: 1000, perMinute: 60_000, perHour: 3_600_000, perDay: 86_400_000 } as const;

export const limitRuleSchema = z
  .strictObject({
    /** Unique in gateway.yaml (global and services' rules together): its counters, header entry and metrics label. */
    name: z.string().regex(LIMIT_NAME, 'must be 1-48 of a-z 0-9 _ - (starting with a letter or digit)'),
    /** Which requests it applies to; absent: every request (of the service, for a service's rule). */
    match: z
      .strictObject({
        /** Methods it applies to; absent: all. A GET rule also covers HEAD. */
        methods: z
          .array(z.enum(HTTP_METHODS, { error: `must be one of ${HTTP_METHODS.join(', ')}` }))
          .min(1)
          .optional(),
        /** A path pattern as in routes (`/v1/pets/{petId}`); absent: every path. */
        path: z
          .string()
          .superRefine((value, ctx) => {
            const problem = patternProblem(value);
            if (problem) ctx.addIssue({ code: 'custom', message: `"${value.slice(0, 80)}" ${problem}` });
          })
          .optional(),
      })
      .prefault({}),
    /** The attributes whose values together name one counter (each value hashed into the Redis key). */
    by: z.array(byPart).min(1, 'name at least one attribute').max(8),
    perSecond: limit.optional(),
    perMinute: limit.optional(),
    perHour: limit.optional(),
    perDay: limit.optional(),
    /** fixed: windows aligned to the clock; gcra: a cell rate over the window, with `burst`. */
    algorithm: z.enum(['fixed', 'gcra']).default('fixed'),
    /** gcra only: requests that may come at once (at most the limit); default 1. */
    burst: z.number().int().min(1).max(1_000_000_000).optional(),
    /** Units a matching request takes from this rule. */
    cost: z.number().int().min(1).max(10_000).default(1),
    /** A request lacking an attribute of `by`: `skip` the rule, or `refuse` it (400 limit_attribute_missing). */
    whenMissing: z.enum(['skip', 'refuse']).default('skip'),
    /**
     * Requests (and WebSocket tunnels) of one counter in flight at once, across all replicas; one
     * more is refused 429 too_many_concurrent_requests (gateway/rule-slots.ts).
     */
    maxConcurrent: z.number().int().min(1).max(1_000_000).optional(),
  })
  .superRefine((rule, ctx) => {
    const set = (Object.keys(RULE_WINDOWS) as Array<keyof typeof RULE_WINDOWS>).filter((w) => rule[w] !== undefined);
    // A rule may cap only what is in flight (maxConcurrent), without a window.
    if (set.length > 1 || (set.length === 0 && rule.maxConcurrent === undefined))
      ctx.addIssue({
        code: 'custom',
        path: set.length ? [set[1]!] : [],
        message: set.length
          ? `set one window, not ${set.join(' and ')}`
          : 'set one of perSecond, perMinute, perHour, perDay, or maxConcurrent',
      });
    const windowLimit = set.length === 1 ? rule[set[0]!]! : undefined;
    if (set.length === 0 && rule.algorithm === 'gcra')
      ctx.addIssue({ code: 'custom', path: ['algorithm'], message: 'gcra needs a window (perSecond, perMinute, perHour or perDay)' });
    if (rule.burst !== undefined && rule.algorithm !== 'gcra')
      ctx.addIssue({ code: 'custom', path: ['burst'], message: 'only with algorithm: gcra' });
    if (rule.burst !== undefined && windowLimit !== undefined && rule.burst > windowLimit)
      ctx.addIssue({ code: 'custom', path: ['burst'], message: `cannot exceed the limit (${windowLimit})` });
    if (rule.cost !== undefined && windowLimit !== undefined && rule.cost > windowLimit)
      ctx.addIssue({ code: 'custom', path: ['cost'], message: `cannot exceed the limit (${windowLimit}): no request could pass` });
    const params = new Set([...(rule.match.path ?? '').matchAll(/\{([^}]*)\}/g)].map((m) => m[1]));
    rule.by.forEach((text, i) => {
      const part = parseByPart(text);
      if (typeof part !== 'string' && part.kind === 'path' && !params.has(part.name))
        ctx.addIssue({ code: 'custom', path: ['by', i], message: `match.path has no parameter {${part.name}}` });
    });
  });

export const limitsSchema = z.array(limitRuleSchema).max(64).default([]);

export type LimitRuleConfig = z.output<typeof limitRuleSchema>;

/** Rule names once in the whole file (global and every service's): each names its own counters. */
export function duplicateLimitNames(
  global: readonly LimitRuleConfig[],
  services: ReadonlyArray<{ limits: readonly LimitRuleConfig[] }>,
  ctx: z.RefinementCtx,
): void {
  const seen = new Set<string>();
  const check = (rules: readonly LimitRuleConfig[], path: Array<string | number>) =>
    rules.forEach((rule, i) => {
      if (seen.has(rule.name))
        ctx.addIssue({ code: 'custom', path: [...path, i, 'name'], message: `duplicate limit rule name "${rule.name}"` });
      seen.add(rule.name);
    });
  check(global, ['limits']);
  services.forEach((service, i) => check(service.limits, ['services', i, 'limits']));
}
