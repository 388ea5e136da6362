import { describe, expect, it } from 'vitest';
import { KeyCache } from '../../src/gateway/key-cache.js';
import type { KeyRecord } from '../../src/keys/record.js';
import type { KeyStore } from '../../src/store/key-store.js';

// A key called now and then is re-read in the background near the end of its freshness, so its
// requests never wait for the store; the TTL still bounds how long a record is served unread.

const record: KeyRecord = { id: 'abcdefabcdef', hash: 'h', name: '', plan: 'free', status: 'active', createdAt: '' };

function countingStore() {
  const store = {
    reads: 0,
    current: record as KeyRecord | null,
    release: [] as Array<() => void>,
    /** When set, reads wait for `release` to be called. */
    hold: false,
    async get() {
      store.reads++;
      if (store.hold) await new Promise<void>((resolve) => store.release.push(resolve));
      return store.current;
    },
    onChange() {},
  };
  return store;
}

describe('key cache refresh ahead of expiry', () => {
  const freshMs = 30_000;

  it('serves a key near the end of its freshness from memory and re-reads it off the path', async () => {
    let now = 0;
    const store = countingStore();
    const cache = new KeyCache(store as unknown as KeyStore, { freshMs, staleMs: 300_000, maxEntries: 10, now: () => now });
    expect(await cache.lookup(record.id)).toEqual({ found: record });
    now = 20_000;
    expect(cache.lookup(record.id)).toEqual({ found: record });
    expect(store.reads).toBe(1);
    // In the last quarter: answered at once (not a promise), read in the background, once.
    now = 23_000;
    store.current = { ...record, plan: 'pro' };
    store.hold = true;
    expect(cache.lookup(record.id)).toEqual({ found: record });
    expect(cache.lookup(record.id)).toEqual({ found: record });
    expect(store.reads).toBe(2);
    store.release.shift()!();
    await new Promise((resolve) => setImmediate(resolve));
    store.hold = false;
    // The refreshed record counts from the refresh: fresh well past the first read's TTL.
    now = 45_000;
    expect(cache.lookup(record.id)).toEqual({ found: { ...record, plan: 'pro' } });
    expect(store.reads).toBe(2);
  });

  it('still reads on the path once an unused entry has expired', async () => {
    let now = 0;
    const store = countingStore();
    const cache = new KeyCache(store as unknown as KeyStore, { freshMs, staleMs: 300_000, maxEntries: 10, now: () => now });
    await cache.lookup(record.id);
    now = 31_000;
    const lookup = cache.lookup(record.id);
    expect(lookup).toBeInstanceOf(Promise);
    expect(await lookup).toEqual({ found: record });
    expect(store.reads).toBe(2);
  });
});
