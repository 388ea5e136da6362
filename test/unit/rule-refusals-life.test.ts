import { describe, expect, it } from 'vitest';
import { RuleRefusals } from '../../src/gateway/rule-refusals.js';
import type { RulesOutcome } from '../../src/store/quota-store.js';
import { ruleCharge } from '../helpers/rule-charges.js';

// How long a limit rule's refusal is answered from memory (src/gateway/rule-refusals.ts): until the
// rule could fit, or the minute's edge, and, with leases of rule counters (whose give-backs lower a
// counter), no longer than the longest life it is given.

const T0 = Date.UTC(2026, 10, 22, 10, 0, 5);
const rules = [ruleCharge('minute', 3, 60_000, false, 1, 'd')];
/** The rule's window is full (3 of 3) at T0: it could fit again at the next minute, 55 s away. */
const refusal: RulesOutcome = {
  verdict: 'limited',
  minuteCount: 0,
  dayCount: 0,
  rejections: 0,
  nowMs: T0,
  bannedUntilMs: 0,
  cost: 1,
  minuteTatUs: 0,
  refusedBy: 0,
  rules: [{ startMs: T0 - 5000, count: 3, tatUs: 0 }],
};

describe('a remembered rule refusal', () => {
  for (const [life, lastsMs] of [
    [undefined, 55_000],
    [1500, 1500],
  ] as const) {
    it(`with ${life === undefined ? 'no longest life' : `a longest life of ${life} ms`}: answered for ${lastsMs} ms`, () => {
      const clock = { nowMs: T0 };
      const refusals = new RuleRefusals(10, () => clock.nowMs, life);
      refusals.remember('k', rules, refusal, T0);
      clock.nowMs = T0 + lastsMs - 1;
      expect(refusals.answer('k', rules)?.verdict).toBe('limited');
      clock.nowMs = T0 + lastsMs;
      expect(refusals.answer('k', rules)).toBeUndefined();
    });
  }
});
