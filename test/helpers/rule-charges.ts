import { ruleGcra, type RuleCharge } from '../../src/quota/limit-rules.js';

/** A rule's charge as the gateway makes it (limit-rules.ts), for store-level tests: a gcra rule with a burst of 2. */
export function ruleCharge(name: string, limit: number, windowMs: number, gcra: boolean, cost: number, digest: string): RuleCharge {
  const g = gcra ? ruleGcra(limit, windowMs, 2) : undefined;
  return { name, digest, limit, windowMs, gcra, intervalUs: g?.intervalUs ?? 0, burst: g?.burst ?? 0, cost };
}
