import type { PolicyKvStore } from '../policy-kv-store.js';

/**
 * The policies' KV on the embedded store (one process): a Map in insertion order, expired entries
 * dropped when read, and the oldest dropped beyond `maxEntries` so memory stays bounded.
 */
export class MemoryPolicyKv implements PolicyKvStore {
  private readonly entries = new Map<string, { value: string; expiresAtMs: number }>();

  constructor(
    private readonly maxEntries = 100_000,
    private readonly now: () => number = Date.now,
  ) {}

  get(namespace: string, key: string): Promise<string | undefined> {
    return Promise.resolve(this.live(`${namespace}\n${key}`)?.value);
  }

  set(namespace: string, key: string, value: string, ttlSeconds: number): Promise<void> {
    this.store(`${namespace}\n${key}`, value, ttlSeconds);
    return Promise.resolve();
  }

  add(namespace: string, key: string, value: string, ttlSeconds: number): Promise<boolean> {
    const id = `${namespace}\n${key}`;
    if (this.live(id)) return Promise.resolve(false);
    this.store(id, value, ttlSeconds);
    return Promise.resolve(true);
  }

  delete(namespace: string, key: string): Promise<void> {
    this.entries.delete(`${namespace}\n${key}`);
    return Promise.resolve();
  }

  private live(id: string) {
    const entry = this.entries.get(id);
    if (entry && entry.expiresAtMs <= this.now()) {
      this.entries.delete(id);
      return undefined;
    }
    return entry;
  }

  private store(id: string, value: string, ttlSeconds: number): void {
    this.entries.delete(id);
    this.entries.set(id, { value, expiresAtMs: this.now() + ttlSeconds * 1000 });
    if (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
  }
}
