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
}

export type KeyPatch = Partial<Pick<KeyRecord, 'plan' | 'status' | 'perMinute' | 'perDay' | 'name' | 'shadow'>>;

/** The record as shown to operators: everything but the hash. */
export function publicView(record: KeyRecord): Omit<KeyRecord, 'hash'> {
  const { hash: _hash, ...rest } = record;
  return rest;
}
