import { describe, expect, it } from 'vitest';
import { KeyCache } from '../../src/gateway/key-cache.js';
import { CONTINUE, type RequestContext } from '../../src/gateway/context.js';
import { authenticate } from '../../src/gateway/policies/authenticate.js';
import { hashApiKey, newApiKey } from '../../src/keys/format.js';
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

  // Requests reach the cache through the authenticate policy, which used to ask `cached()` first:
  // that answers a fresh entry without the refresh, so every key in use still expired and was
  // read on a request's path once per TTL.
  it('through the authenticate policy: a key in use waits for the store on its first request only', async () => {
    const { id, key } = newApiKey();
    const authorization = `Bearer ${key}`;
    const request = () =>
      ({ req: { headers: { authorization }, rawHeaders: ['Authorization', authorization] } }) as unknown as RequestContext;
    let now = 0;
    const store = countingStore();
    store.current = { ...record, id, hash: hashApiKey(key) };
    const cache = new KeyCache(store as unknown as KeyStore, { freshMs, staleMs: 300_000, maxEntries: 10, now: () => now });
    const policy = authenticate(cache);
    expect(await policy(request())).toBe(CONTINUE);
    expect(store.reads).toBe(1);
    // In the last quarter of its freshness: answered at once, and one read starts in the background.
    now = 23_000;
    store.hold = true;
    expect(policy(request())).toBe(CONTINUE);
    expect(policy(request())).toBe(CONTINUE);
    expect(store.reads).toBe(2);
    store.release.shift()!();
    await new Promise((resolve) => setImmediate(resolve));
    // Past the first read's TTL: still answered at once (not a promise), from the refreshed record.
    now = 45_000;
    expect(policy(request())).toBe(CONTINUE);
    expect(store.reads).toBe(2);
  });
});
