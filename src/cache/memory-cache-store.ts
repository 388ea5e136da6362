import { LRUCache } from 'lru-cache';
import type { CachePlace } from './cache-key.js';
import type { CacheStore } from './cache-store.js';
import { sizeOf, type Stored } from './stored-response.js';

export interface MemoryStoreEvents {
  /** An entry pushed out to make room (not one that expired or was replaced). */
  evicted(): void;
}

/**
 * One replica's entries for one service, least recently used evicted first once their bytes pass
 * `maxBytes`. Entries are kept as objects: a hit decodes nothing.
 */
export class MemoryCacheStore implements CacheStore {
  private readonly entries: LRUCache<string, Stored>;
  /** The keys of each URL (tag), for invalidation. */
  private readonly byTag = new Map<string, Set<string>>();
  private readonly tagOfKey = new Map<string, string>();

  constructor(
    readonly maxBytes: number,
    events?: MemoryStoreEvents,
  ) {
    this.entries = new LRUCache<string, Stored>({
      maxSize: maxBytes,
      sizeCalculation: (stored) => Math.max(1, sizeOf(stored)),
      dispose: (_stored, key, reason) => {
        if (reason === 'evict') events?.evicted();
        if (reason !== 'set') this.unindex(key);
      },
    });
  }

  /** Bytes held. */
  get bytes(): number {
    return this.entries.calculatedSize;
  }

  async getMany(keys: readonly string[]): Promise<(Stored | undefined)[]> {
    return keys.map((key) => this.getNow(key));
  }

  /** getMany without a promise per key (the memory store answers at once). */
  getNow(key: string): Stored | undefined {
    const stored = this.entries.get(key);
    if (stored && stored.expiresAtMs <= Date.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return stored;
  }

  async set(tag: string, key: string, stored: Stored): Promise<void> {
    // Larger than the whole store: lru-cache would refuse it anyway.
    if (sizeOf(stored) > this.maxBytes) return;
    this.entries.set(key, stored);
    if (!this.entries.has(key)) return;
    this.tagOfKey.set(key, tag);
    let keys = this.byTag.get(tag);
    if (!keys) this.byTag.set(tag, (keys = new Set()));
    keys.add(key);
  }

  async invalidate(tag: string, _place: CachePlace): Promise<void> {
    for (const key of [...(this.byTag.get(tag) ?? [])]) this.entries.delete(key);
  }

  async purge(service: string, prefix?: string): Promise<number> {
    let purged = 0;
    for (const [key, stored] of [...this.entries.entries()]) {
      if (stored.service !== service || (prefix !== undefined && !stored.path.startsWith(prefix))) continue;
      if (this.entries.delete(key) && stored.kind === 'response') purged++;
    }
    return purged;
  }

  private unindex(key: string): void {
    const tag = this.tagOfKey.get(key);
    if (tag === undefined) return;
    this.tagOfKey.delete(key);
    const keys = this.byTag.get(tag);
    keys?.delete(key);
    if (keys?.size === 0) this.byTag.delete(tag);
  }
}
