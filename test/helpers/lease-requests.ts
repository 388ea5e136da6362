import type { LeaseRequest } from '../../src/store/quota-store.js';

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
