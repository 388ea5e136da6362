import type { PlansConfig } from '../../config/plans-schema.js';
import type { AuditLog } from '../../store/audit-log.js';
import type { KeyStore } from '../../store/key-store.js';
import type { QuotaStore } from '../../store/quota-store.js';

/** What the key lifecycle works on: the same stores for the admin API (in a gateway) and the CLI. */
export interface LifecycleDeps {
  keys: KeyStore;
  quotas: QuotaStore;
  audit: AuditLog;
  /** The plans in force (the gateway's hot-reloaded copy; the CLI reads plans.yaml once). */
  plans(): PlansConfig;
  now(): number;
}

/**
 * How a field is named in messages: `perMinute` in the API, `--per-minute` in the CLI, so one
 * validation speaks each caller's language.
 */
export type FieldLabel = (field: string) => string;

/**
 * Who asks for a change (the audit's actor: an admin token's label, an OpenID subject, or `cli`),
 * under which role, and how they name fields.
 */
export interface Caller {
  actor: string;
  role: string;
  email?: string;
  label: FieldLabel;
}
