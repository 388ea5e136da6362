import type { KeyPatch, KeyRecord } from '../../keys/record.js';
import type { KeyStore } from '../key-store.js';

/** The embedded store: one process, nothing persisted. Used when no Redis is configured. */
export class MemoryKeyStore implements KeyStore {
  private readonly records = new Map<string, KeyRecord>();
  private readonly listeners: Array<(id: string | null) => void> = [];

  async create(record: KeyRecord): Promise<void> {
    if (this.records.has(record.id)) throw new Error(`key id ${record.id} already exists`);
    this.records.set(record.id, { ...record });
  }

  async get(id: string): Promise<KeyRecord | null> {
    const record = this.records.get(id);
    return record ? { ...record } : null;
  }

  async list(): Promise<KeyRecord[]> {
    return [...this.records.values()].map((r) => ({ ...r }));
  }

  async update(id: string, patch: KeyPatch): Promise<KeyRecord | null> {
    const record = this.records.get(id);
    if (!record) return null;
    const updated = withPatch(record, patch);
    this.records.set(id, updated);
    await this.announce(id);
    return { ...updated };
  }

  async announce(id: string): Promise<void> {
    for (const listener of this.listeners) listener(id);
  }

  onChange(listener: (id: string | null) => void): void {
    this.listeners.push(listener);
  }

  async close(): Promise<void> {}
}

/** Patch semantics shared by both stores: an undefined quota field removes the override. */
export function withPatch(record: KeyRecord, patch: KeyPatch): KeyRecord {
  const updated: KeyRecord = { ...record, ...patch };
  for (const field of ['perMinute', 'perDay', 'shadow', 'owner'] as const) {
    if (field in patch && patch[field] === undefined) delete updated[field];
  }
  return updated;
}
