import type { KeyChange, KeyPatch, KeyRecord } from '../keys/record.js';

/**
 * Where key records live. Redis in production, memory for a single demo process.
 * Every replica keeps records cached, so each change is also published to `onChange`
 * listeners on every process (Redis pub/sub), which drop their cached copy at once.
 */
export interface KeyStore {
  create(record: KeyRecord): Promise<void>;
  get(id: string): Promise<KeyRecord | null>;
  /** Every record, oldest first. */
  list(): Promise<KeyRecord[]>;
  /** Every key id, in no particular order (for paging through the records). */
  ids(): Promise<string[]>;
  /** Applies the patch atomically and announces the change; null when the id is unknown. */
  update(id: string, patch: KeyPatch): Promise<KeyChange | null>;
  /**
   * Replaces the key's hash atomically (id, plan, counters and bans stay, as they hang on the id).
   * With `graceEndsAt` the replaced hash stays valid until then; without, it stops at once.
   * Announces the change; null when the id is unknown.
   */
  rotate(id: string, hash: string, graceEndsAt?: string): Promise<KeyChange | null>;
  /** Announces that cached state for `id` is stale (record change, unban). */
  announce(id: string): Promise<void>;
  /**
   * Called with a key id whenever that key changed anywhere, and with null when changes may have
   * been missed (a lost subscription), meaning: trust nothing cached without re-reading it.
   */
  onChange(listener: (id: string | null) => void): void;
  close(): Promise<void>;
}
