// The gateway's Redis key names in one place (the bundled backend keeps its own). Everything of one API key shares the `{id}` hash tag, so it lives
// in one Redis Cluster slot and one script can touch it atomically.

import { ruleSubjectOf } from '../../quota/limit-rules.js';

export const INVALIDATION_CHANNEL = 'tg:invalidate';
/** Lease notices: a leased key's counts changed (src/store/redis/quota-script.ts publishes them). */
export const QUOTA_NOTICE_CHANNEL = 'tg:quota-notices';
export const KEY_INDEX = 'tg:keys';
/** The admin audit (a stream); one key, so it lives in one Cluster slot. */
export const AUDIT_STREAM = 'tg:audit';

export const keyRecordKey = (id: string) => `tg:key:{${id}}`;
/** `id`: a key id, or `owner:<name>` for the windows an owner's keys share (quota-subject.ts). */
export const quotaKey = (id: string) => `tg:quota:{${id}}`;
/** The replicas holding a lease of a quotaKey's subject, each with its lease's end (quota-script.ts LEASE_SCRIPT). */
export const leaseHoldersKey = (id: string) => `tg:lease-holders:{${id}}`;
/** gcra: a quotaKey's TAT moves down of the last τ (quota-script.ts TAT_MOVES; quota-state.ts TatMove), by time. */
export const tatMovesKey = (id: string) => `tg:tat-moves:{${id}}`;
/** The concurrency slots held for a quotaKey's subject (slot-scripts.ts): same hash tag, same Cluster slot. */
export const slotsKey = (id: string) => `tg:slots:{${id}}`;
/** The id of a quotaKey; undefined for any other name. */
export function quotaSubject(redisKey: string): string | undefined {
  return redisKey.startsWith('tg:quota:{') && redisKey.endsWith('}') ? redisKey.slice(10, -1) : undefined;
}
/** A WebSocket ticket waiting for its handshake, by the ticket's hash (src/keys/ws-ticket.ts). */
export const wsTicketKey = (ticketHash: string) => `tg:wsticket:{${ticketHash}}`;
/**
 * Marks one replica's batch of degraded-mode admissions as applied (reconcile-script.ts): in the
 * subject's hash tag, so the script touches one slot.
 */
export const reconciledKey = (id: string, replicaId: string, seq: number) => `tg:reconciled:{${id}}:${replicaId}:${seq}`;
/**
 * The last turn of quota decisions one gateway process wrote on one connection (turn-marks.ts), by
 * the process's id and the connection's number.
 */
export const appliedKey = (replicaId: string, connection: number) => `tg:applied:{${replicaId}}:${connection}`;
/** The write a gateway process's replica acknowledgements WAIT behind (replica-acks.ts), by the process's id. */
export const ackedKey = (replicaId: string) => `tg:acked:{${replicaId}}`;
/** Marks one reservation as settled (quota-script.ts SETTLE_SCRIPT): in the subject's hash tag, like the quota hash. */
export const settledKey = (id: string, settlementId: string) => `tg:settled:{${id}}:${settlementId}`;
/**
 * Usage for invoicing (quota-script.ts, usageAdd): one hash per subject and day of its calendar, in
 * the subject's hash tag. The scripts build the name from their KEYS[1] (tg:quota:{id}).
 */
export const USAGE_KEY_PREFIX = 'tg:usage:{';
/** SCAN's MATCH for the usage of one subject (its glob characters escaped), or of all. */
export function usageKeyPattern(subject?: string): string {
  return subject === undefined ? `${USAGE_KEY_PREFIX}*` : `${USAGE_KEY_PREFIX}${subject.replace(/[*?[\]\\]/g, '\\$&')}}:*`;
}
/** A limit rule's counter (limit-rules-script.ts): the rule's name and the digest of its values, in a hash tag of their own. */
export const limitKey = (name: string, digest: string) => `tg:limit:${name}:{${digest}}`;
/** The lease subject of a limitKey (quota/limit-rules.ts ruleSubject); undefined for any other name. */
export function limitSubject(redisKey: string): string | undefined {
  const match = /^tg:limit:([^{}]+):\{([^{}]+)\}$/.exec(redisKey);
  return match ? ruleSubjectOf(match[1]!, match[2]!) : undefined;
}
