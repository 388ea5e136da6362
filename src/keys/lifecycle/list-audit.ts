import { AUDIT_ID_PATTERN, type AuditPage } from '../../store/audit-log.js';
import type { FieldLabel, LifecycleDeps } from './deps.js';
import { auditQuery, parseInput } from './inputs.js';
import { LifecycleError } from './lifecycle-error.js';

const DEFAULT_LIMIT = 50;

/** One page of the audit, newest first; `cursor` is the `next` of the previous page. */
export async function listAudit(deps: LifecycleDeps, query: unknown, label: FieldLabel): Promise<AuditPage> {
  const { cursor, limit = DEFAULT_LIMIT } = parseInput(auditQuery, query, label, 'invalid_query');
  if (cursor !== undefined && !AUDIT_ID_PATTERN.test(cursor))
    throw new LifecycleError('invalid_query', `${label('cursor')} is not a cursor of the audit`);
  return deps.audit.page({ before: cursor, limit });
}
