import type { QuotaOutcome } from '../../src/quota/quota-state.js';

/**
 * An outcome without its gcra move number, for comparing two stores' answers: each numbers a
 * state's moves from its own first step (and forgets them with the state at its own moment), so
 * the number is compared per store, where it matters, by what a settlement carrying it frees
 * (quota-settle-differential.test.ts).
 */
export function sansMoveNo<T extends QuotaOutcome>(outcome: T): Omit<T, 'moveNo'> {
  const { moveNo: _moveNo, ...rest } = outcome;
  return rest;
}
