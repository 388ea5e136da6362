import { z } from 'zod';
import { patternProblem, RULE_METHODS } from './routes-schema.js';

// Schema of a `policies:` list (gateway.yaml, top level and per service; docs/plugins.md): the
// user's own policies, each loaded from a file or an npm package at start, its options checked
// against the policy's own schema at every load (gateway/user-policies/policies-in-force.ts).

const routeMatch = z.strictObject({
  /** HTTP method, upper case; absent: any (a GET rule also covers HEAD). */
  method: z.enum(RULE_METHODS).optional(),
  /** Full request path with `{param}` segments, like the route rules. */
  path: z.string().superRefine((value, ctx) => {
    const problem = patternProblem(value);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  }),
});

export const policyEntrySchema = z.strictObject({
  /** `./file.js` (relative to the config directory), an absolute path, or an npm package name. Loaded at start only. */
  use: z.string().min(1).max(1024),
  /** Checked against the policy's options schema; hot. */
  options: z.unknown().optional(),
  /** Longest an `access` or `beforeForward` hook may take; past it the request gets 503 policy_timeout. */
  budgetMs: z.number().int().min(1).max(60_000).default(1000),
  /** Only these routes; absent: every request of the scope (the gateway, or the service). */
  routes: z.array(routeMatch).min(1).max(100).optional(),
});

export const policiesSchema = z.array(policyEntrySchema).max(50).default([]);

export type PolicyEntry = z.infer<typeof policyEntrySchema>;
