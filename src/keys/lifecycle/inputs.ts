import { z } from 'zod';
import { anchorDayOf } from '../../config/calendar-fields.js';
import { PLAN_NAME, quotaSchema, type PlansConfig } from '../../config/plans-schema.js';
import { scopeListSchema } from '../../policies/access/scope.js';
import { cidrSchema } from '../../policies/ip-rules/ip-rules-schema.js';
import { OWNER_PATTERN } from '../record.js';
import type { FieldLabel } from './deps.js';
import { LifecycleError } from './lifecycle-error.js';

// The schemas of every change to a key, for the admin API's JSON bodies and the CLI's options
// alike. Objects are strict: an unknown field is refused, never ignored.

const required = (expected: string) => ({
  error: (issue: { input?: unknown }) => (issue.input === undefined ? 'is required' : `must be ${expected}`),
});
const count = z.number(required('a whole number')).int('must be a whole number').min(1, 'must be at least 1');
const planName = z.string(required('a plan name'));
// Control characters would let a name forge lines in terminals and logs.
const name = z
  .string(required('a string'))
  .max(200, 'must be at most 200 characters')
  .regex(/^[^\p{Cc}]*$/u, 'must not contain control characters');
const owner = z
  .string(required('a string'))
  .regex(OWNER_PATTERN, 'must be 1 to 64 lowercase letters, digits, ".", "_" or "-", starting with a letter or digit');
const shadow = z.boolean(required('true or false'));
/** A date whose day of the month the key's month begins on (a shorter month: its last day). */
const billingAnchor = z
  .string(required('a date'))
  .refine(
    (value) => anchorDayOf(value) !== undefined,
    "must be a date, e.g. 2026-01-31 (the month then begins on the 31st, or a shorter month's last day)",
  );
/** At least one network: an empty list would lock the key out everywhere (remove the list instead). */
const allowedCidrs = z
  .array(cidrSchema, required('a list of CIDRs'))
  .min(1, 'must list at least one CIDR (null or --clear removes the restriction)')
  .max(100, 'must list at most 100 CIDRs');
const instant = z.iso.datetime({ offset: true, error: 'must be an ISO 8601 date-time with a zone, e.g. 2027-01-31T00:00:00Z' });

export const createKeyInput = z.strictObject({
  plan: planName,
  name: name.optional(),
  expiresAt: instant.optional(),
  perMinute: count.optional(),
  perDay: count.optional(),
  /** The key's own month window (with or without its own minute and day). */
  perMonth: count.optional(),
  /** The key's own concurrency limit (requests and tunnels in flight at once). */
  maxConcurrent: count.optional(),
  billingAnchor: billingAnchor.optional(),
  /** Shadow override: the key's refusals are counted and logged, never enforced. */
  shadow: shadow.optional(),
  /** The customer the key belongs to: keys of one owner share a `scope: owner` plan's windows. */
  owner: owner.optional(),
  /** The only networks the key may be used from; absent: any. */
  allowedCidrs: allowedCidrs.optional(),
  /** What the key may do: services and routes with `requireScopes` admit only keys holding those. */
  scopes: scopeListSchema.optional(),
});

/** `null` removes an optional setting (own quotas, expiry). */
export const patchKeyInput = z
  .strictObject({
    plan: planName.optional(),
    name: name.optional(),
    expiresAt: instant.nullable().optional(),
    perMinute: count.nullable().optional(),
    perDay: count.nullable().optional(),
    perMonth: count.nullable().optional(),
    maxConcurrent: count.nullable().optional(),
    billingAnchor: billingAnchor.nullable().optional(),
    shadow: shadow.nullable().optional(),
    allowedCidrs: allowedCidrs.nullable().optional(),
    scopes: scopeListSchema.nullable().optional(),
  })
  .refine((patch) => Object.keys(patch).length > 0, 'give at least one field to change');

/** Grace up to 30 days: long enough for any redeploy, short enough that an old secret dies. */
export const MAX_GRACE_SECONDS = 30 * 86_400;
export const rotateKeyInput = z.strictObject({
  graceSeconds: z
    .number(required('a whole number of seconds'))
    .int('must be a whole number')
    .min(0, 'must be 0 or more')
    .max(MAX_GRACE_SECONDS, `must be at most ${MAX_GRACE_SECONDS} (30 days)`),
});

const pageLimit = z
  .string()
  .regex(/^\d{1,3}$/, 'must be a whole number from 1 to 200')
  .transform(Number)
  .refine((n) => n >= 1 && n <= 200, 'must be a whole number from 1 to 200');

/** Query parameters arrive as strings. */
export const listKeysQuery = z.strictObject({
  cursor: z.string().optional(),
  limit: pageLimit.optional(),
  plan: z.string().optional(),
  status: z.enum(['active', 'revoked', 'expired'], { error: 'must be active, revoked or expired' }).optional(),
  /** Part of the id, name or owner, any case (the console's search). */
  q: z.string().max(200).optional(),
  /** Exactly this owner's keys (an owner-scoped admin principal sees only its own). */
  owner: z.string().max(64).optional(),
});

export const auditQuery = z.strictObject({
  cursor: z.string().optional(),
  limit: pageLimit.optional(),
  keyId: z.string().max(64).optional(),
  /** The token label, OpenID subject or email of who made the change. */
  actor: z.string().max(256).optional(),
  /** Changes to this owner's keys only. */
  owner: z.string().max(64).optional(),
  action: z
    .enum(['key.create', 'key.update', 'key.revoke', 'key.rotate', 'key.unban', 'key.credits'], { error: 'must be an audit action' })
    .optional(),
});

/** Validates `input` or throws a LifecycleError naming the first bad field in the caller's terms. */
export function parseInput<S extends z.ZodType>(
  schema: S,
  input: unknown,
  label: FieldLabel,
  code: 'invalid_body' | 'invalid_query' = 'invalid_body',
): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  if (issue.code === 'unrecognized_keys') {
    // Names of unknown fields are echoed only when they look like names, never arbitrary input.
    const names = issue.keys.map((key) => (/^[A-Za-z][A-Za-z0-9_-]{0,40}$/.test(key) ? label(key) : '(a field)'));
    throw new LifecycleError(code, `unknown field${names.length > 1 ? 's' : ''} ${names.join(', ')}`);
  }
  const field = issue.path.map(String).join('.');
  if (!field && issue.code === 'invalid_type') throw new LifecycleError(code, 'the body must be a JSON object');
  throw new LifecycleError(code, field ? `${label(field)} ${issue.message}` : issue.message);
}

/** The plan must be one plans.yaml defines (its name is echoed only if it looks like a plan name). */
export function requirePlan(plan: string, plans: PlansConfig): string {
  if (Object.hasOwn(plans.plans, plan)) return plan;
  const known = Object.keys(plans.plans).join(', ');
  const shown = PLAN_NAME.test(plan) ? `"${plan}"` : '(not a plan name)';
  throw new LifecycleError('unknown_plan', `unknown plan ${shown} (plans: ${known})`);
}

/**
 * Own quotas come in pairs with the day no lower than the minute, the rules of a plan.
 * Returns the pair to store: numbers, `null` to remove both, or undefined when neither was given.
 */
export function quotaPair(
  perMinute: number | null | undefined,
  perDay: number | null | undefined,
  label: FieldLabel,
): { perMinute: number; perDay: number } | null | undefined {
  if (perMinute === undefined && perDay === undefined) return undefined;
  if (perMinute === null && perDay === null) return null;
  if (typeof perMinute !== 'number' || typeof perDay !== 'number') {
    throw new LifecycleError(
      'invalid_body',
      `give both ${label('perMinute')} and ${label('perDay')} (numbers, or both null to use the plan's)`,
    );
  }
  if (!quotaSchema.safeParse({ perMinute, perDay }).success) {
    throw new LifecycleError('invalid_body', `${label('perDay')} cannot be lower than ${label('perMinute')}`);
  }
  return { perMinute, perDay };
}

/** A key's own month is no smaller than its own day (the plan's day is checked where it is in force: never, a smaller month simply binds). */
export function monthNotBelowDay(perMonth: number | null | undefined, perDay: number | undefined, label: FieldLabel): void {
  if (typeof perMonth === 'number' && perDay !== undefined && perMonth < perDay) {
    throw new LifecycleError('invalid_body', `${label('perMonth')} cannot be lower than ${label('perDay')}`);
  }
}

/** An expiry must lie in the future; stored in one canonical form (UTC, milliseconds). */
export function futureInstant(value: string, nowMs: number, label: FieldLabel): string {
  const ms = Date.parse(value);
  if (!(ms > nowMs)) {
    throw new LifecycleError('invalid_body', `${label('expiresAt')} must be in the future (it is ${new Date(nowMs).toISOString()} now)`);
  }
  return new Date(ms).toISOString();
}
