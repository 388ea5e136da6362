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
  /** Shadow override: the key's limits are decided and counted, its refusals admitted (README, "Shadow plans"). */
  shadow?: boolean;
  /** The customer the key belongs to: keys of one owner share the windows of a `scope: owner` plan. */
  owner?: string;
}

/** Owner names: they go inside a Redis hash tag (`{owner:…}`), so no braces, and short. */
export const OWNER_PATTERN = /^[a-z0-9][a-z0-9._-]{0,63}$/;

export type KeyPatch = Partial<Pick<KeyRecord, 'plan' | 'status' | 'perMinute' | 'perDay' | 'name' | 'shadow' | 'owner'>>;

/** The record as shown to operators: everything but the hash. */
export function publicView(record: KeyRecord): Omit<KeyRecord, 'hash'> {
  const { hash: _hash, ...rest } = record;
  return rest;
}
