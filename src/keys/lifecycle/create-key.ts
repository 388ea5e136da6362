import { hashApiKey, newApiKey } from '../format.js';
import { publicView, type KeyRecord, type PublicKeyRecord } from '../record.js';
import { audit, changesBetween } from './audit-changes.js';
import type { Caller, LifecycleDeps } from './deps.js';
import { createKeyInput, futureInstant, monthNotBelowDay, parseInput, quotaPair, requirePlan } from './inputs.js';

export interface CreatedKey {
  record: PublicKeyRecord;
  /** The API key: returned once, here, and never stored (only its hash is). */
  key: string;
}

/** `{plan, name?, expiresAt?, perMinute?, perDay?, perMonth?, maxConcurrent?, billingAnchor?, shadow?, owner?, allowedCidrs?, scopes?}` → a new key, stored, announced and audited. */
export async function createKey(deps: LifecycleDeps, input: unknown, caller: Caller): Promise<CreatedKey> {
  const fields = parseInput(createKeyInput, input, caller.label);
  const plan = requirePlan(fields.plan, deps.plans());
  const quota = quotaPair(fields.perMinute, fields.perDay, caller.label);
  monthNotBelowDay(fields.perMonth, quota?.perDay, caller.label);
  const nowMs = deps.now();
  const { id, key } = newApiKey();
  const record: KeyRecord = {
    id,
    hash: hashApiKey(key),
    name: fields.name ?? '',
    plan,
    status: 'active',
    createdAt: new Date(nowMs).toISOString(),
    ...quota,
    ...(fields.perMonth !== undefined && { perMonth: fields.perMonth }),
    ...(fields.maxConcurrent !== undefined && { maxConcurrent: fields.maxConcurrent }),
    ...(fields.billingAnchor !== undefined && { billingAnchor: fields.billingAnchor }),
    ...(fields.shadow && { shadow: true }),
    ...(fields.owner !== undefined && { owner: fields.owner }),
    ...(fields.allowedCidrs !== undefined && { allowedCidrs: [...new Set(fields.allowedCidrs)] }),
    ...(fields.scopes !== undefined && { scopes: [...new Set(fields.scopes)] }),
  };
  if (fields.expiresAt !== undefined) record.expiresAt = futureInstant(fields.expiresAt, nowMs, caller.label);
  await deps.keys.create(record);
  // A replica may hold a cached "unknown id" for it (someone tried the id before it existed).
  await deps.keys.announce(id);
  await audit(deps, caller, 'key.create', id, changesBetween(null, publicView(record)), record.owner);
  return { record: publicView(record), key };
}
