import type { Redis } from 'ioredis';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { gcraMinute } from '../../src/quota/gcra.js';
import type { LeaseGrant, LeaseRequest } from '../../src/store/quota-store.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { leaseRequest } from './lease-requests.js';

/** A gcra block as its replica knows it: the grant, the number its ask gave it, its holder and leaseMs. */
export type HeldBlock = LeaseGrant & { no: number; holder: string; leaseMs: number };

/**
 * A store on a clock of the test's own, asked for gcra blocks of `quota` directly (no replica in
 * between): `ask` numbers each ask as a replica does (quota-leases.ts, rule 9), `back` gives a
 * block's unused units back, `fill` admits single units at the clock's moment until one is refused.
 */
export function gcraBlockStore(client: Redis, quota: Quota, ban: BanPolicy, startMs: number) {
  const clock = { nowMs: startMs };
  const store = new RedisQuotaStore(client, () => clock.nowMs);
  const reserve = (subject: string, request: Partial<LeaseRequest>) => store.reserve(subject, quota, ban, leaseRequest(request));
  let asks = 0;
  let giveBacks = 0;
  const ask = async (subject: string, request: { want: number; holder?: string; leaseMs?: number }): Promise<HeldBlock> => {
    const no = ++asks;
    const holder = request.holder ?? 'test';
    const leaseMs = request.leaseMs ?? 1000;
    return { ...(await reserve(subject, { ...request, holder, leaseMs, block: no })), no, holder, leaseMs };
  };
  /** The give-back request of a block's `units` (numbered: `no` again for a retry). */
  const backRequest = (block: HeldBlock, units: number, no = ++giveBacks): Partial<LeaseRequest> => ({
    holder: block.holder,
    leaseMs: block.leaseMs,
    giveBack: units,
    giveBackNo: no,
    giveBackMinuteStartMs: block.minuteStartMs,
    giveBackDayStartMs: block.dayStartMs,
    giveBackBlock: block.no,
    giveBackHashEpoch: block.hashEpoch,
  });
  const back = (subject: string, block: HeldBlock, units: number) => reserve(subject, backRequest(block, units));
  /** Single units at the clock's moment until one is refused (at most `most`): how many were admitted. */
  const fill = async (subject: string, most = 1_000_000) => {
    let n = 0;
    while (n < most && (await store.consume(subject, quota, ban, 1)).verdict === 'allowed') n++;
    return n;
  };
  return { clock, store, ask, back, backRequest, reserve, fill };
}

/** Units admitted at one moment (ms on the test's clock). */
export interface Admission {
  atMs: number;
  cost: number;
}

/**
 * The largest excess over GCRA's bound of any span [a, b] between two admissions: the units in it
 * less (burst + ⌊(b − a) / T⌋). GCRA promises it is never above 0.
 */
export function worstExcess(admitted: Admission[], quota: Quota): number {
  const { burst, intervalUs } = gcraMinute(quota);
  const at = [...admitted].sort((x, y) => x.atMs - y.atMs);
  let excess = -Infinity;
  for (let i = 0; i < at.length; i++) {
    let units = 0;
    for (let j = i; j < at.length; j++) {
      units += at[j]!.cost;
      excess = Math.max(excess, units - (burst + Math.floor(((at[j]!.atMs - at[i]!.atMs) * 1000) / intervalUs)));
    }
  }
  return excess;
}
