import { z } from 'zod';
import { ownedFieldReason } from '../header-rules/owned-fields.js';

// Schema of a `cost:` that the upstream reports (a service's, or a route's in routes.costs): the
// request reserves `reserve` units in the quota step before it is forwarded, and once the answer
// has ended the reservation is settled to the cost the upstream reported in a response field or
// a trailer, capped at `max` (src/gateway/reported-cost/, docs/upstream.md).

/** Most units one answer may be settled to: large enough for tokens or bytes, small enough to catch a typo. */
export const MAX_REPORTED_COST = 1_000_000_000;

/** RFC 9110 §5.1: a field name is a token. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

const fieldName = z
  .string()
  .transform((name) => name.toLowerCase())
  .superRefine((name, ctx) => {
    if (!TOKEN.test(name) || name.length > 128)
      ctx.addIssue({ code: 'custom', message: 'must be a header field name (letters, digits, - and a few marks)' });
    else {
      const owned = ownedFieldReason(name);
      if (owned) ctx.addIssue({ code: 'custom', message: owned });
    }
  });

const units = (least: number) =>
  z
    .number({ error: 'must be a number' })
    .int('must be a whole number')
    .min(least, `must be at least ${least}`)
    .max(MAX_REPORTED_COST, `must be at most ${MAX_REPORTED_COST}`);

export const reportedCostSchema = z
  .strictObject({
    /** The response field the upstream reports the request's cost in (whole units), e.g. x-usage-units. */
    fromResponseHeader: fieldName.optional(),
    /** The trailer field it reports it in at the end of a streamed (chunked or HTTP/2) answer; read before the header. */
    fromTrailer: fieldName.optional(),
    /** Units reserved in the quota step before the request is forwarded (windows and credits alike). */
    reserve: units(1),
    /** Most units one answer is settled to, whatever the upstream reports. */
    max: units(1),
    /** true: the client's answer keeps the upstream's field (and trailer); false: they are removed. */
    forwardHeader: z.boolean().default(false),
  })
  .superRefine((cost, ctx) => {
    if (cost.fromResponseHeader === undefined && cost.fromTrailer === undefined)
      ctx.addIssue({ code: 'custom', message: 'give fromResponseHeader, fromTrailer or both' });
    if (cost.max < cost.reserve) ctx.addIssue({ code: 'custom', path: ['max'], message: 'cannot be lower than reserve' });
  });

export type ReportedCost = z.output<typeof reportedCostSchema>;
