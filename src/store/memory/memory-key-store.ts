import type { KeyChange, KeyPatch, KeyRecord } from '../../keys/record.js';
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

  async ids(): Promise<string[]> {
    return [...this.records.keys()];
  }

  async update(id: string, patch: KeyPatch): Promise<KeyChange | null> {
    return this.change(id, (record) => withPatch(record, patch));
  }

  async rotate(id: string, hash: string, graceEndsAt?: string): Promise<KeyChange | null> {
    return this.change(id, (record) => {
      const { previousHash: _previousHash, graceEndsAt: _graceEndsAt, ...rest } = record;
      return graceEndsAt ? { ...rest, hash, previousHash: record.hash, graceEndsAt } : { ...rest, hash };
    });
  }

  private async change(id: string, apply: (record: KeyRecord) => KeyRecord): Promise<KeyChange | null> {
    const before = this.records.get(id);
    if (!before) return null;
    const after = apply(before);
    this.records.set(id, after);
    await this.announce(id);
    return { before: { ...before }, after: { ...after } };
  }

  async announce(id: string): Promise<void> {
    for (const listener of this.listeners) listener(id);
  }

  onChange(listener: (id: string | null) => void): void {
    this.listeners.push(listener);
  }

  async close(): Promise<void> {}
}

/** Patch semantics shared by both stores: an undefined optional field removes it. */
export function withPatch(record: KeyRecord, patch: KeyPatch): KeyRecord {
  const updated: KeyRecord = { ...record, ...patch };
  for (const field of [
    'perMinute',
    'perDay',
    'perMonth',
    'maxConcurrent',
    'billingAnchor',
    'expiresAt',
    'shadow',
    'owner',
    'allowedCidrs',
    'scopes',
  ] as const) {
    if (field in patch && patch[field] === undefined) delete updated[field];
  }
  return updated;
}
