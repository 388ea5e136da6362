import type { Quota } from '../../src/config/plans-schema.js';
import type { LeaseGrant, LeaseRequest } from '../../src/store/quota-store.js';

/** A lease request asking nothing and giving nothing back (leaseMs 1 s, unnumbered), with `request`'s fields over it. */
export function leaseRequest(request: Partial<LeaseRequest>): LeaseRequest {
  return {
    want: 0,
    divisor: 1,
    minBlock: 1,
    leaseMs: 1000,
    giveBack: 0,
    giveBackMinuteStartMs: 0,
    giveBackDayStartMs: 0,
    holder: 'test',
    ends: false,
    heldUntilMs: 0,
    ...request,
  };
}

/**
 * A replica's ask numbered `block` for `want` units (quota-leases.ts `ask`), as `holder`, naming
 * its unanswered asks from `cancelFrom` (0: none).
 */
export function leaseAsk(block: number, want: number, cancelFrom = 0, holder = 'h1'): LeaseRequest {
  return leaseRequest({ want, block, holder, ...(cancelFrom > 0 && { cancelFrom }) });
}

/**
 * The give-back a lease's end sends (quota-leases.ts `giveBack` with `ends`, leaseMs 1 s): `left`
 * unused units of `grant`'s block numbered `block` under `quota`, numbered `giveBackNo` when any.
 */
export function leaseEnd(quota: Quota, grant: LeaseGrant, block: number, left: number, giveBackNo: number, holder = 'h1'): LeaseRequest {
  return leaseRequest({
    giveBack: left,
    giveBackMinuteStartMs: grant.minuteStartMs,
    giveBackDayStartMs: grant.dayStartMs,
    giveBackMonthStartMs: grant.monthStartMs ?? 0,
    giveBackBlock: quota.algorithm === 'gcra' ? block : 0,
    holder,
    ends: true,
    heldUntilMs: grant.nowMs + 1000,
    ...(left > 0 && { giveBackNo }),
    giveBackCredits: quota.credits === 'required' ? left : 0,
    giveBackCreditEpoch: grant.creditEpoch ?? 0,
    giveBackHashEpoch: grant.hashEpoch ?? 0,
  });
}
