import type { AuditAction, FieldChange } from '../../store/audit-log.js';
import type { Caller, LifecycleDeps } from './deps.js';
import type { PublicKeyRecord } from '../record.js';

/**
 * The fields that differ between two public views of a key, with both values (null for absent).
 * Public views carry no hash, so no secret can reach the audit through here.
 */
export function changesBetween(before: PublicKeyRecord | null, after: PublicKeyRecord): Record<string, FieldChange> {
  const changes: Record<string, FieldChange> = {};
  const fields = new Set([...Object.keys(before ?? {}), ...Object.keys(after)]);
  for (const field of fields) {
    const was = (before as Record<string, unknown> | null)?.[field] ?? null;
    const is = (after as Record<string, unknown>)[field] ?? null;
    // Lists (allowedCidrs) compare by content, not identity.
    if (was !== is && JSON.stringify(was) !== JSON.stringify(is)) changes[field] = { before: was, after: is };
  }
  return changes;
}

/** Appends one change to the audit, after it was applied (an audit entry means it happened). */
export async function audit(
  deps: LifecycleDeps,
  caller: Caller,
  action: AuditAction,
  keyId: string,
  changes: Record<string, FieldChange>,
  owner: string | undefined,
  reason?: string,
): Promise<void> {
  await deps.audit.append({
    at: new Date(deps.now()).toISOString(),
    actor: caller.actor,
    role: caller.role,
    ...(caller.email !== undefined && { email: caller.email }),
    ...(owner !== undefined && { owner }),
    ...(reason !== undefined && { reason }),
    action,
    keyId,
    changes,
  });
}
