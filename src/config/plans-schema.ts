import { z } from 'zod';
import type { Calendar } from './calendar-fields.js';
import { SERVICE_NAME } from './services-schema.js';

// Schema of config/plans.yaml. Every field is documented in the shipped file; bounds keep a
// typo (an extra zero, a negative number) from becoming a policy.

const count = (what: string) =>
  z
    .number({ error: `${what} must be a number` })
    .int(`${what} must be a whole number`)
    .min(1, `${what} must be at least 1`);

const quotaFields = {
  perMinute: count('perMinute').describe('units admitted per UTC minute'),
  perDay: count('perDay').describe('units admitted per day (the UTC day, or in gateway.yaml quota.timeZone)'),
  perMonth: count('perMonth')
    .optional()
    .describe("units admitted per month (the calendar month in quota.timeZone, or from a key's billing anchor); none: no month window"),
};

const planFields = {
  ...quotaFields,
  shadow: z
    .boolean({ error: 'shadow must be true or false' })
    .optional()
    .describe('decide and count as usual, but admit what would be refused (README, "Shadow plans")'),
  algorithm: z
    .enum(['fixed', 'gcra'], { error: 'algorithm must be "fixed" (UTC windows) or "gcra" (smooth, with burst)' })
    .optional()
    .describe('fixed: counts per UTC minute and day; gcra: cell rate over any 60 s span, same UTC-day budget (src/quota/gcra.ts)'),
  scope: z
    .enum(['key', 'owner'], { error: 'scope must be "key" or "owner"' })
    .optional()
    .describe('owner: all keys of one owner share one set of windows and one ban state (a key without an owner keeps its own)'),
  credits: z
    .literal('required', { error: 'credits must be "required" (or left out: no prepaid credits)' })
    .optional()
    .describe(
      'required: each admitted request also spends its cost from the prepaid balance of its key (or owner, under scope: owner); one that the balance cannot cover is refused 402',
    ),
  maxConcurrent: count('maxConcurrent')
    .optional()
    .describe(
      'requests and WebSocket tunnels in flight at once per key (or per owner, under scope: owner), across all replicas; one more is refused 429 too_many_concurrent_requests',
    ),
  burst: count('burst').optional().describe('gcra only: units that may arrive at once (1..perMinute; default 1)'),
  services: z
    .array(z.string({ error: 'services must list service names' }).regex(SERVICE_NAME, 'a service name is 1-32 of a-z 0-9 _ -'), {
      error: 'services must be a list of service names, e.g. [categories, default]',
    })
    .min(1, 'services must name at least one service (leave it out to allow every service)')
    .refine((names) => new Set(names).size === names.length, 'services lists a service twice')
    .optional()
    .describe(
      'the services of gateway.yaml its keys may call (`default`: upstream.url); another one answers 403 service_not_in_plan; none listed: all',
    ),
};

/** gcra's emission interval is whole microseconds: beyond this a minute's interval would round far up. */
export const GCRA_MAX_PER_MINUTE = 1_000_000;

const dayNotBelowMinute = { message: 'perDay cannot be lower than perMinute', path: ['perDay'] };
const monthNotBelowDay = { message: 'perMonth cannot be lower than perDay', path: ['perMonth'] };
const monthFits = (q: { perDay: number; perMonth?: number }) => q.perMonth === undefined || q.perMonth >= q.perDay;

/** A negotiated per-key quota (`keys set-quota`): the windows only. */
export const quotaSchema = z
  .strictObject(quotaFields)
  .refine((q) => q.perDay >= q.perMinute, dayNotBelowMinute)
  .refine(monthFits, monthNotBelowDay);

/** A plan: its windows and how they are enforced. */
export const planSchema = z
  .strictObject(planFields)
  .refine((q) => q.perDay >= q.perMinute, dayNotBelowMinute)
  .refine(monthFits, monthNotBelowDay)
  .refine((q) => q.burst === undefined || q.algorithm === 'gcra', {
    message: 'burst applies only to algorithm: gcra (fixed windows admit a whole window at once)',
    path: ['burst'],
  })
  .refine((q) => q.burst === undefined || q.burst <= q.perMinute, {
    message: 'burst cannot exceed perMinute (never more than perMinute in any 60 s span)',
    path: ['burst'],
  })
  .refine((q) => q.algorithm !== 'gcra' || q.perMinute <= GCRA_MAX_PER_MINUTE, {
    message: `perMinute of a gcra plan must be at most ${GCRA_MAX_PER_MINUTE} (its interval is whole microseconds)`,
    path: ['perMinute'],
  });

export const PLAN_NAME = /^[a-z][a-z0-9_-]{0,31}$/;

export const plansFileSchema = z.strictObject({
  plans: z
    .record(z.string().regex(PLAN_NAME, 'plan names are lowercase letters, digits, "-" or "_", starting with a letter'), planSchema)
    .refine((plans) => Object.keys(plans).length > 0, 'at least one plan is required'),
  ban: z.strictObject({
    afterRejections: count('afterRejections').describe('429s within `window` seconds that trigger a ban'),
    window: count('window').describe('seconds over which rejections are counted'),
    duration: count('duration').describe('seconds a ban lasts'),
  }),
});

/**
 * A plan's quota, or a key's derived from it (quota-for.ts), with the calendar its day and month
 * follow (src/quota/calendar.ts): absent, UTC days and calendar months.
 */
export type Quota = z.infer<typeof planSchema> & { calendar?: Calendar };
/** plans.yaml, and the zone (gateway.yaml quota.timeZone) its days and months follow: absent, UTC. */
export type PlansConfig = z.infer<typeof plansFileSchema> & { timeZone?: string };

/** The plans with the zone their days and months follow (the gateway's and the CLI's loaders). */
export function plansInZone(plans: PlansConfig, timeZone: string): PlansConfig {
  return timeZone === 'UTC' ? plans : { ...plans, timeZone };
}
export type BanPolicy = PlansConfig['ban'];
