import { AUDIT_ID_PATTERN, type AuditEntry, type AuditPage } from '../../store/audit-log.js';
import type { FieldLabel, LifecycleDeps } from './deps.js';
import { auditQuery, parseInput } from './inputs.js';
import { LifecycleError } from './lifecycle-error.js';

const DEFAULT_LIMIT = 50;
/** Entries read per store call while filtering, and at most read for one filtered page. */
const SCAN_BATCH = 200;
const MAX_SCANNED = 5000;

/**
 * One page of the audit, newest first; `cursor` is the `next` of the previous page. With a filter
 * (`keyId`, `actor` (who: label, subject or email), `action`, `owner`) the log is read from the cursor on until the page is full, or
 * MAX_SCANNED entries were read: then the page may be short, and `next` goes on from where the
 * reading stopped.
 */
export async function listAudit(deps: LifecycleDeps, query: unknown, label: FieldLabel): Promise<AuditPage> {
  const { cursor, limit = DEFAULT_LIMIT, keyId, actor, action, owner } = parseInput(auditQuery, query, label, 'invalid_query');
  if (cursor !== undefined && !AUDIT_ID_PATTERN.test(cursor))
    throw new LifecycleError('invalid_query', `${label('cursor')} is not a cursor of the audit`);
  if (keyId === undefined && actor === undefined && action === undefined && owner === undefined)
    return deps.audit.page({ before: cursor, limit });
  const matches = (e: AuditEntry) =>
    (keyId === undefined || e.keyId === keyId) &&
    (actor === undefined || e.actor === actor || e.email === actor) &&
    (owner === undefined || e.owner === owner) &&
    (action === undefined || e.action === action);
  const entries: AuditEntry[] = [];
  let before = cursor;
  for (let scanned = 0; scanned < MAX_SCANNED;) {
    const page = await deps.audit.page({ before, limit: SCAN_BATCH });
    for (const entry of page.entries) {
      scanned++;
      before = entry.id;
      if (!matches(entry)) continue;
      entries.push(entry);
      if (entries.length === limit) return { entries, next: page.next === null && entry === page.entries.at(-1) ? null : entry.id };
    }
    if (page.next === null) return { entries, next: null };
  }
  return { entries, next: before ?? null };
}
