import { quotaSchema, type Quota } from '../config/plans-schema.js';

/**
 * Parses a negotiated per-key quota given as two option strings: both or neither, whole numbers,
 * and the day no lower than the minute (the same rules as a plan). Returns an error text on failure.
 */
export function parseQuotaOverride(perMinute?: string, perDay?: string): Quota | undefined | string {
  if (perMinute === undefined && perDay === undefined) return undefined;
  if (perMinute === undefined || perDay === undefined) return 'give both --per-minute and --per-day';
  for (const [option, value] of [['--per-minute', perMinute], ['--per-day', perDay]] as const) {
    if (!/^\d{1,15}$/.test(value)) return `${option} must be a whole number, got "${value}"`;
  }
  const result = quotaSchema.safeParse({ perMinute: Number(perMinute), perDay: Number(perDay) });
  if (!result.success) {
    const issue = result.error.issues[0]!;
    return `${issue.path.join('.') === 'perDay' ? '--per-day' : '--per-minute'}: ${issue.message}`;
  }
  return result.data;
}
