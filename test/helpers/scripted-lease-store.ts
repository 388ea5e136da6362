import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { QuotaLeases, type LeaseSettings } from '../../src/quota/quota-leases.js';
import type { LeaseGrant, LeaseRequest, QuotaNotice } from '../../src/store/quota-store.js';

// A lease store for unit tests of src/quota/quota-leases.ts: each reservation waits until the test
// answers it, and the test delivers notices (and gaps) itself, in the order it chooses.

export const NO_BANS: BanPolicy = { afterRejections: 1_000_000, window: 60, duration: 60 };
export const SETTINGS: LeaseSettings = { leaseMs: 1000, hotPerSecond: 3, minBlock: 2, maxBlock: 20, spread: 1, replicas: 1 };
export const QUOTA: Quota = { perMinute: 1000, perDay: 1_000_000 };
export const MINUTE = Date.UTC(2030, 0, 10, 12, 0);
export const DAY = Date.UTC(2030, 0, 10);

export function scriptedStore() {
  const asks: Array<{ quota: Quota; request: LeaseRequest; answer: (grant: Partial<LeaseGrant>) => void; fail: (err: Error) => void }> = [];
  const hooks: { apply?: (notice: QuotaNotice) => void; gap?: () => void } = {};
  const store = {
    reserve: (_id: string, quota: Quota, _ban: BanPolicy, request: LeaseRequest) =>
      new Promise<LeaseGrant>((resolve, reject) => {
        const grant = {
          granted: 0,
          minuteStartMs: MINUTE,
          dayStartMs: DAY,
          nowMs: MINUTE + 5_000,
          minuteCount: 0,
          dayCount: 0,
          minuteTatUs: 0,
          seq: 0,
        };
        asks.push({ quota, request, answer: (g) => resolve({ ...grant, ...g }), fail: reject });
      }),
    notices: (apply: (notice: QuotaNotice) => void, gap: () => void) => Object.assign(hooks, { apply, gap }),
  };
  return { store, asks, hooks };
}

export const notice = (seq: number, minuteCount: number, more: Partial<QuotaNotice> = {}): QuotaNotice => ({
  subject: 'k',
  seq,
  minuteStartMs: MINUTE,
  minuteCount,
  dayStartMs: DAY,
  dayCount: minuteCount,
  minuteTatUs: 0,
  bannedUntilMs: 0,
  nowMs: MINUTE + 5_000,
  ...more,
});

/** Lets the reactions to answers given so far run. */
export const settle = () => new Promise((resolve) => setImmediate(resolve));

/**
 * A replica of key 'k' on a scripted store, its clock at 5 s: `send(n, quota)` makes n requests of
 * one unit and tells what admit answered to each, 'waits' for one waiting for an ask (it fails
 * with the ask, unheeded). `loseFirstAsk(message)`: three requests make the key hot, and its first
 * ask fails (an answer that never came). `renewalOnItsWay()`: the first ask is granted 10 units,
 * then six requests use it past half, so a renewal (the second ask) is on its way.
 */
export function scriptedReplica() {
  const { store, asks } = scriptedStore();
  const clock = { nowMs: 5_000 };
  const leases = new QuotaLeases(store, SETTINGS, () => clock.nowMs);
  const send = (n: number, quota: Quota = QUOTA) =>
    Array.from({ length: n }, () => {
      const answer = leases.admit('k', quota, NO_BANS, 1);
      if (!(answer instanceof Promise)) return answer;
      answer.catch(() => undefined);
      return 'waits';
    });
  const loseFirstAsk = async (message = 'Command timed out') => {
    send(3);
    asks[0]!.fail(new Error(message));
    await settle();
  };
  const renewalOnItsWay = async () => {
    send(3);
    asks[0]!.answer({ granted: 10, seq: 4 });
    await settle();
    send(6);
  };
  return { leases, asks, clock, send, loseFirstAsk, renewalOnItsWay };
}
