import { KEY_ID_PATTERN } from '../format.js';
import { publicView, type KeyRecord, type PublicKeyRecord } from '../record.js';
import type { FieldLabel, LifecycleDeps } from './deps.js';
import { listKeysQuery, parseInput } from './inputs.js';
import { LifecycleError } from './lifecycle-error.js';

export interface KeyPage {
  keys: PublicKeyRecord[];
  /** Pass as `cursor` for the next page; null on the last. */
  next: string | null;
}

const DEFAULT_LIMIT = 50;

/**
 * One page of keys in id order, optionally filtered by plan, status, owner and a search `q` (part of
 * the id, name or owner) (`expired`: active but past
 * its expiresAt; `active`: active and not expired). The cursor is the last id of the page, so pages
 * stay consistent while keys are added (new ones appear in their place). Reads ids once, then
 * records in batches until the page is full: cost grows with the keys skipped by a filter.
 */
export async function listKeys(deps: LifecycleDeps, query: unknown, label: FieldLabel): Promise<KeyPage> {
  const { cursor, limit = DEFAULT_LIMIT, plan, status, q, owner } = parseInput(listKeysQuery, query, label, 'invalid_query');
  if (cursor !== undefined && !KEY_ID_PATTERN.test(cursor))
    throw new LifecycleError('invalid_query', `${label('cursor')} is not a cursor of this list`);
  const nowMs = deps.now();
  const needle = q?.trim().toLowerCase() || undefined;
  const matches = (record: KeyRecord) =>
    (plan === undefined || record.plan === plan) &&
    (owner === undefined || record.owner === owner) &&
    (status === undefined || statusOf(record, nowMs) === status) &&
    (needle === undefined || [record.id, record.name, record.owner ?? ''].some((field) => field.toLowerCase().includes(needle)));
  const ids = (await deps.keys.ids()).filter((id) => cursor === undefined || id > cursor).sort();
  const found: KeyRecord[] = [];
  for (let start = 0; start < ids.length && found.length <= limit; start += limit + 1) {
    const batch = await Promise.all(ids.slice(start, start + limit + 1).map((id) => deps.keys.get(id)));
    for (const record of batch) if (record && matches(record)) found.push(record);
  }
  const page = found.slice(0, limit);
  return { keys: page.map(publicView), next: found.length > limit ? page[page.length - 1]!.id : null };
}

/** `expired` is derived: the stored status stays `active` until someone revokes the key. */
export function statusOf(record: KeyRecord, nowMs: number): 'active' | 'revoked' | 'expired' {
  if (record.status === 'revoked') return 'revoked';
  return record.expiresAt !== undefined && Date.parse(record.expiresAt) <= nowMs ? 'expired' : 'active';
}
