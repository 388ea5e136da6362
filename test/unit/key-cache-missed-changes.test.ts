import { describe, expect, it } from 'vitest';
import { KeyCache } from '../../src/gateway/key-cache.js';
import type { KeyRecord } from '../../src/keys/record.js';
import type { KeyStore } from '../../src/store/key-store.js';

// When change messages may have been missed (a lost subscription: a Redis restart, a Redis Cluster
// node gone), cached key records must be re-read before they count as fresh, but a key validated
// recently must stay usable while the store cannot be read: the stale window still applies.

const record: KeyRecord = { id: 'abcdefabcdef', hash: 'h', name: '', plan: 'free', status: 'active', createdAt: '' };

function fakeStore() {
  let listener: (id: string | null) => void = () => {};
  const store = {
    reads: 0,
    down: false,
    current: record as KeyRecord | null,
    async get() {
      store.reads++;
      if (store.down) throw new Error('store unreachable');
      return store.current;
    },
    onChange(l: (id: string | null) => void) {
      listener = l;
    },
    missedChanges: () => listener(null),
    changed: (id: string) => listener(id),
  };
  return store;
}

describe('key cache after missed change messages', () => {
  const options = { freshMs: 30_000, staleMs: 300_000, maxEntries: 10 };

  it('re-reads every cached record before serving it as fresh', async () => {
    const store = fakeStore();
    const cache = new KeyCache(store as unknown as KeyStore, options);
    expect(await cache.lookup(record.id)).toEqual({ found: record });
    expect(cache.cached(record.id)).toEqual({ found: record });
    store.current = { ...record, status: 'revoked' };
    store.missedChanges();
    expect(cache.cached(record.id)).toBeUndefined();
    expect(await cache.lookup(record.id)).toEqual({ found: { ...record, status: 'revoked' } });
    expect(store.reads).toBe(2);
  });

  it('keeps a recently validated key usable while the store is unreachable', async () => {
    const store = fakeStore();
    const cache = new KeyCache(store as unknown as KeyStore, options);
    await cache.lookup(record.id);
    store.down = true;
    store.missedChanges();
    // Marked as answered for a failed read: the request has had its time on Redis (gateway/redis-wait.ts).
    expect(await cache.lookup(record.id)).toEqual({ found: record, readFailed: true });
  });

  it('drops a key named in a change message at once, even as a fallback', async () => {
    const store = fakeStore();
    const cache = new KeyCache(store as unknown as KeyStore, options);
    await cache.lookup(record.id);
    store.down = true;
    store.changed(record.id);
    expect(await cache.lookup(record.id)).toEqual({ unavailable: true });
  });
});
