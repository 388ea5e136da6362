import { z } from 'zod';
import { scopeListSchema } from './scope.js';

// Who may call a service or route (docs/policies.md, "Scopes and anonymous callers"): the scopes a
// credential must hold (`requireScopes`), and whether callers without any credential are admitted,
// limited per client address on a plan of their own (`anonymous`). On a service in gateway.yaml
// `services`, and on routes (`routes.access`); hot with the file.

/** Methods a rule may name. A GET rule also covers HEAD (RFC 9110 §9.3.2: HEAD is GET without a body). */
export const HTTP_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

/** Plan names as plans.yaml spells them (config/plans-schema.ts); whether the plan exists is checked across files. */
const planName = z.string().regex(/^[a-z][a-z0-9_-]{0,31}$/, 'must be a plan name of plans.yaml');

/**
 * Per method, the scopes a credential must hold, every one of them (RFC 6750 §3: the `scope`
 * attribute lists them all); `"*"`: every method not listed. A method with no entry and no `"*"`
 * needs no scope.
 */
export const requireScopesSchema = z
  .partialRecord(z.enum([...HTTP_METHODS, '*'], { error: `methods are ${HTTP_METHODS.join(', ')} or "*"` }), scopeListSchema)
  .refine((map) => Object.keys(map).length > 0, 'must name at least one method (or "*")');

/**
 * Requests with no Authorization header at all are admitted as the anonymous consumer of their
 * client address, on `plan`; by default only reads (GET, and HEAD with it).
 */
export const serviceAnonymousSchema = z.strictObject({
  plan: planName,
  methods: z
    .array(z.enum(HTTP_METHODS, { error: `must be one of ${HTTP_METHODS.join(', ')}` }))
    .min(1)
    .default(['GET', 'HEAD']),
});

/** On a route rule the method is the rule's own: only the plan. */
export const routeAnonymousSchema = z.strictObject({ plan: planName });

export type RequireScopes = z.output<typeof requireScopesSchema>;
