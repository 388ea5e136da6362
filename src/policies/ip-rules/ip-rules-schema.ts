import { z } from 'zod';
import { parseCidr } from './cidr.js';

// Schema of `ipRules` (top level of gateway.yaml, and per service): networks refused and, when
// `allow` is given, the only networks admitted. Checked at load, so a typo names its file and field.

/** One network in CIDR notation, or a bare address (one host). */
export const cidrSchema = z.string().superRefine((value, ctx) => {
  const parsed = parseCidr(value);
  if (typeof parsed === 'string') ctx.addIssue({ code: 'custom', message: `"${value.slice(0, 64)}": ${parsed}` });
});

export const cidrListSchema = z.array(cidrSchema).max(10_000);

export const ipRulesSchema = z
  .strictObject({
    /** Refused with 403 ip_not_allowed, whatever `allow` says. */
    deny: cidrListSchema.default([]),
    /** When given (even empty), only these networks are admitted; absent: every network not denied. */
    allow: cidrListSchema.optional(),
  })
  .optional();

export type IpRulesConfig = z.infer<typeof ipRulesSchema>;
