/** What the store keeps of an API key: never the key itself, only its hash. */
export interface KeyRecord {
  id: string;
  hash: string;
  name: string;
  plan: string;
  status: 'active' | 'revoked';
  /** ISO 8601 */
  createdAt: string;
  /** Negotiated quotas that override the plan's (both set, or neither). */
  perMinute?: number;
  perDay?: number;
  /** A negotiated month window (with or without the two above): wins over the plan's `perMonth`. */
  perMonth?: number;
  /** A date (`2026-01-31`): the key's month begins on its day of the month (or a shorter month's last day). */
  billingAnchor?: string;
  /** Own concurrency limit: wins over the plan's `maxConcurrent` (requests and tunnels in flight at once). */
  maxConcurrent?: number;
  /** ISO 8601 (UTC); from this instant on the key is refused with 401 api_key_expired. */
  expiresAt?: string;
  /** After a rotation with grace: the hash of the replaced key, still accepted until `graceEndsAt`. */
  previousHash?: string;
  /** ISO 8601 (UTC): end of the rotation grace. */
  graceEndsAt?: string;
  /** Shadow override: the key's limits are decided and counted, its refusals admitted (README, "Shadow plans"). */
  shadow?: boolean;
  /** The customer the key belongs to: keys of one owner share the windows of a `scope: owner` plan. */
  owner?: string;
  /** The only networks the key may be used from (CIDRs); absent: any. Elsewhere → 403 ip_not_allowed. */
  allowedCidrs?: string[];
  /** What the key may do (RFC 6749 scope names); a service or route may require some (docs/policies.md). */
  scopes?: string[];
}

/** Owner names: they go inside a Redis hash tag (`{owner:…}`), so no braces, and short. */
export const OWNER_PATTERN = /^[a-z0-9][a-z0-9._-]{0,63}$/;

export type KeyPatch = Partial<
  Pick<
    KeyRecord,
    | 'plan'
    | 'status'
    | 'perMinute'
    | 'perDay'
    | 'perMonth'
    | 'maxConcurrent'
    | 'billingAnchor'
    | 'name'
    | 'expiresAt'
    | 'shadow'
    | 'owner'
    | 'allowedCidrs'
    | 'scopes'
  >
>;

/** A record as it was and as it is after one change (for the audit). */
export interface KeyChange {
  before: KeyRecord;
  after: KeyRecord;
}

/** What operators and the admin API see of a record: everything but the hashes. */
export type PublicKeyRecord = Omit<KeyRecord, 'hash' | 'previousHash'>;

export function publicView(record: KeyRecord): PublicKeyRecord {
  const { hash: _hash, previousHash: _previousHash, ...rest } = record;
  return rest;
}
