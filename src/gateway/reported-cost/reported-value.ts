/**
 * What an upstream's cost field says: a whole number of units (capped at the rule's `max`), or
 * `invalid`: anything else (empty, negative, fractional, a unit, several values) charges the
 * reservation, as if nothing had been reported, and is logged: the upstream is at fault, not the
 * client, and no guess at its meaning is safer than the reservation it was admitted with.
 */
export type ReportedValue = { units: number; capped: boolean } | 'invalid';

/** Digits only, optional spaces around them (RFC 9110 §5.5 strips them anyway); at most 16, so the number is exact. */
const WHOLE = /^[ \t]*(\d{1,16})[ \t]*$/;

export function reportedValue(raw: string, max: number): ReportedValue {
  const match = WHOLE.exec(raw);
  if (!match) return 'invalid';
  const units = Number(match[1]);
  return units > max ? { units: max, capped: true } : { units, capped: false };
}
