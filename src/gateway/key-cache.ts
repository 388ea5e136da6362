import { LRUCache } from 'lru-cache';
import type { KeyRecord } from '../keys/record.js';
import type { KeyStore } from '../store/key-store.js';
import type { StoreHealth } from '../store/store-health.js';

/**
 * What a lookup found: a record, a known-unknown id, or a store we could not ask. `readFailed`: a
 * recent record answered because the store's read of it failed (the request has had its time on
 * Redis: gateway/redis-wait.ts).
 */
export type KeyLookup = { found: KeyRecord; readFailed?: true } | { found: null } | { unavailable: true };

interface Entry {
  record: KeyRecord | null;
  fetchedAtMs: number;
  /** Set when change messages may have been missed: re-read before serving, usable only as a fallback. */
  suspect?: true;
}

export interface KeyCacheOptions {
  /** How long an entry is served without asking the store (changes are pushed anyway). */
  freshMs: number;
  /** How long a known key stays usable from cache while the store is unreachable. */
  staleMs: number;
  maxEntries: number;
  /** Shared breaker: while the store is down, answer from stale entries without waiting on it. */
  health?: StoreHealth;
  now?: () => number;
}

/** The last part of an entry's freshness in which a hit also re-reads it, off the request's path. */
const REFRESH_AHEAD_FRACTION = 0.25;

/**
 * In-process cache of key records in front of the key store. Every store change is pushed
 * (pub/sub), so a revocation takes effect on every replica at once; the TTL only bounds the
 * damage of a missed message. Concurrent misses for one id share one store read. A key in use is
 * re-read in the background during the last quarter of its freshness, so a key called now and then
 * (every few seconds, as most customers of an API do) never waits for the store on its request's
 * path: the TTL's bound is kept, the round trip leaves the critical path.
 */
export class KeyCache {
  private readonly entries: LRUCache<string, Entry>;
  private readonly pending = new Map<string, Promise<KeyLookup>>();
  private readonly now: () => number;
  /** Bumped on every invalidation, so a read that started before it cannot refill the cache. */
  private generation = 0;

  constructor(
    private readonly store: KeyStore,
    private readonly options: KeyCacheOptions,
  ) {
    this.now = options.now ?? Date.now;
    this.entries = new LRUCache({ max: options.maxEntries });
    store.onChange((id) => this.invalidate(id));
  }

  invalidate(id: string | null): void {
    this.generation++;
    if (id !== null) {
      this.entries.delete(id);
      return;
    }
    // Change messages may have been missed (the subscription was lost, e.g. a Redis Cluster node
    // went away): nothing is fresh any more, but a key validated recently must stay usable as a
    // stale fallback while its part of the store is still unreachable.
    for (const entry of this.entries.values()) entry.suspect = true;
  }

  private isFresh(entry: Entry | undefined): entry is Entry {
    return entry !== undefined && !entry.suspect && this.now() - entry.fetchedAtMs < this.options.freshMs;
  }

  /**
   * A fresh cached answer, or undefined when the store would have to be asked. It starts no
   * refresh: a request's path asks `lookup`, which answers a fresh entry at once too.
   */
  cached(id: string): KeyLookup | undefined {
    const entry = this.entries.get(id);
    return this.isFresh(entry) ? { found: entry.record } : undefined;
  }

  lookup(id: string): KeyLookup | Promise<KeyLookup> {
    const entry = this.entries.get(id);
    if (this.isFresh(entry)) {
      if (this.dueForRefresh(id, entry)) void this.fetch(id, entry);
      return { found: entry.record };
    }
    const pending = this.pending.get(id);
    if (pending) return pending;
    if (this.options.health && !this.options.health.shouldTry()) return this.fallback(entry);
    return this.fetch(id, entry);
  }

  /** A fresh entry near the end of its freshness, with no read of it under way and a store to ask. */
  private dueForRefresh(id: string, entry: Entry): boolean {
    const left = entry.fetchedAtMs + this.options.freshMs - this.now();
    if (left > this.options.freshMs * REFRESH_AHEAD_FRACTION || this.pending.has(id)) return false;
    return !this.options.health || this.options.health.shouldTry();
  }

  /**
   * Store unreachable: a key we validated recently stays usable for a bounded time; an unknown
   * one cannot be judged (never a 401 for it: the caller gets 503).
   */
  private fallback(previous: Entry | undefined): KeyLookup {
    if (previous?.record && this.now() - previous.fetchedAtMs < this.options.staleMs) return { found: previous.record };
    return { unavailable: true };
  }

  private fetch(id: string, previous: Entry | undefined): Promise<KeyLookup> {
    const generation = this.generation;
    const read = this.store.get(id).then(
      (record): KeyLookup => {
        this.options.health?.succeeded();
        if (generation === this.generation) this.entries.set(id, { record, fetchedAtMs: this.now() });
        return { found: record };
      },
      (err: unknown): KeyLookup => {
        this.options.health?.failed(err);
        const fallback = this.fallback(previous);
        return 'found' in fallback && fallback.found ? { found: fallback.found, readFailed: true } : fallback;
      },
    );
    this.pending.set(id, read);
    void read.finally(() => this.pending.delete(id));
    return read;
  }
}
