/** What changed in one field: values as shown to operators (never a secret or a hash). */
export interface FieldChange {
  before: unknown;
  after: unknown;
}

export type AuditAction = 'key.create' | 'key.update' | 'key.revoke' | 'key.rotate' | 'key.unban' | 'key.credits';

/** One admin change, by the API or the CLI. */
export interface AuditEntry {
  /** Position in the log (a Redis stream id, `<ms>-<seq>`): also the paging cursor. */
  id: string;
  /** ISO 8601 */
  at: string;
  /** The admin token's label, the OpenID subject of a console sign-in, or `cli`. */
  actor: string;
  /** The role the change was made under (viewer, operator, admin). */
  role?: string;
  /** The person's email, for an OpenID sign-in. */
  email?: string;
  /** The owner of the key changed, when it has one (an owner-scoped principal reads only those). */
  owner?: string;
  action: AuditAction;
  keyId: string;
  /** Why, as the actor gave it (required for credit changes). */
  reason?: string;
  changes: Record<string, FieldChange>;
}

export interface AuditPage {
  /** Newest first. */
  entries: AuditEntry[];
  /** Pass as `before` for the next (older) page; null at the oldest entry. */
  next: string | null;
}

/** Entry ids as the log hands them out; anything else is not a cursor of ours. */
export const AUDIT_ID_PATTERN = /^\d{1,16}-\d{1,16}$/;

/**
 * The append-only record of admin changes, capped at a configured number of entries (the oldest
 * go first): a Redis stream shared by every replica and the CLI, or a list in the embedded store.
 */
export interface AuditLog {
  append(entry: Omit<AuditEntry, 'id'>): Promise<void>;
  /** Entries older than `before` (all when absent), newest first, at most `limit`. */
  page(options: { before?: string; limit: number }): Promise<AuditPage>;
}
