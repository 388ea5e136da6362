import { publicView, type KeyPatch, type PublicKeyRecord } from '../record.js';
import type { AuditAction } from '../../store/audit-log.js';
import { audit, changesBetween } from './audit-changes.js';
import type { Caller, LifecycleDeps } from './deps.js';
import { notFound } from './find-key.js';
import { futureInstant, monthNotBelowDay, parseInput, patchKeyInput, quotaPair, requirePlan } from './inputs.js';

/**
 * `{plan?, name?, perMinute?, perDay?, perMonth?, maxConcurrent?, billingAnchor?, shadow?, expiresAt?, allowedCidrs?, scopes?}`
 * (null removes own quotas, the own month, the own concurrency limit, the anchor, shadow, the expiry, the networks or the scopes) →
 * the changed record; in force on every replica at once (the store announces it).
 */
export async function updateKey(deps: LifecycleDeps, id: string, input: unknown, caller: Caller): Promise<PublicKeyRecord> {
  const fields = parseInput(patchKeyInput, input, caller.label);
  const patch: KeyPatch = {};
  if (fields.plan !== undefined) patch.plan = requirePlan(fields.plan, deps.plans());
  if (fields.name !== undefined) patch.name = fields.name;
  const quota = quotaPair(fields.perMinute, fields.perDay, caller.label);
  if (quota === null) Object.assign(patch, { perMinute: undefined, perDay: undefined });
  else if (quota) Object.assign(patch, quota);
  monthNotBelowDay(fields.perMonth, quota?.perDay, caller.label);
  if (fields.perMonth === null) patch.perMonth = undefined;
  else if (fields.perMonth !== undefined) patch.perMonth = fields.perMonth;
  if (fields.maxConcurrent === null) patch.maxConcurrent = undefined;
  else if (fields.maxConcurrent !== undefined) patch.maxConcurrent = fields.maxConcurrent;
  if (fields.billingAnchor === null) patch.billingAnchor = undefined;
  else if (fields.billingAnchor !== undefined) patch.billingAnchor = fields.billingAnchor;
  if (fields.shadow === null || fields.shadow === false) patch.shadow = undefined;
  else if (fields.shadow) patch.shadow = true;
  if (fields.allowedCidrs === null) patch.allowedCidrs = undefined;
  else if (fields.allowedCidrs !== undefined) patch.allowedCidrs = [...new Set(fields.allowedCidrs)];
  if (fields.scopes === null) patch.scopes = undefined;
  else if (fields.scopes !== undefined) patch.scopes = [...new Set(fields.scopes)];
  if (fields.expiresAt === null) patch.expiresAt = undefined;
  else if (fields.expiresAt !== undefined) patch.expiresAt = futureInstant(fields.expiresAt, deps.now(), caller.label);
  return apply(deps, id, patch, caller, 'key.update');
}

/** Stops the key at once on every replica. Revoking a revoked key changes nothing and succeeds. */
export async function revokeKey(deps: LifecycleDeps, id: string, caller: Caller): Promise<PublicKeyRecord> {
  return apply(deps, id, { status: 'revoked' }, caller, 'key.revoke');
}

async function apply(deps: LifecycleDeps, id: string, patch: KeyPatch, caller: Caller, action: AuditAction): Promise<PublicKeyRecord> {
  const change = await deps.keys.update(id, patch);
  if (!change) throw notFound(id);
  const after = publicView(change.after);
  await audit(deps, caller, action, id, changesBetween(publicView(change.before), after), change.after.owner);
  return after;
}
