import { describe, expect, it, vi } from 'vitest';
import { admit, requestWantsRevalidation } from '../../src/cache/admission.js';
import { decodeStored, encodeStored, type StoredResponse } from '../../src/cache/stored-response.js';
import { cacheSchema } from '../../src/config/cache-schema.js';

// The store decision for a corpus of upstream responses (the integration corpus in
// test/integration/cache.test.ts checks what is then served).

const config = cacheSchema.parse({ ttlSeconds: 60, staleIfErrorSeconds: 10 });
const NOW = Date.parse('2026-01-01T00:00:00Z');
const decide = (headers: Record<string, string | string[]>, options: { status?: number; consumer?: string; none?: boolean } = {}) =>
  admit(
    options.none ? { ...config, privateResponses: 'none' } : config,
    '/v1/x',
    'api.test',
    { authorization: 'Bearer tg_secret', 'accept-language': 'en' },
    options.status ?? 200,
    { date: new Date(NOW).toUTCString(), ...headers },
    'consumer' in options ? options.consumer : 'key1',
    NOW,
  );

describe('admission', () => {
  const corpus: Array<[string, Record<string, string | string[]>, string]> = [
    ['public, max-age=30', { 'cache-control': 'public, max-age=30' }, 'shared 30s'],
    ['s-maxage=30', { 'cache-control': 's-maxage=30' }, 'shared 30s'],
    ['max-age=30 (not public)', { 'cache-control': 'max-age=30' }, 'consumer 30s'],
    ['public, max-age=600 (capped)', { 'cache-control': 'public, max-age=600' }, 'shared 60s'],
    ['no Cache-Control (heuristic ttlSeconds)', {}, 'consumer 60s'],
    ['no-store', { 'cache-control': 'public, no-store, max-age=30' }, 'not-storable'],
    ['private', { 'cache-control': 'private, max-age=30' }, 'not-storable'],
    ['Vary: *', { 'cache-control': 'public, max-age=30', vary: '*' }, 'vary-star'],
    ['Set-Cookie', { 'cache-control': 'public, max-age=30', 'set-cookie': ['a=b'] }, 'set-cookie'],
    ['public, no-cache + ETag', { 'cache-control': 'public, no-cache', etag: '"1"' }, 'shared 0s'],
    ['public, no-cache, no validator', { 'cache-control': 'public, no-cache' }, 'not-reusable'],
    ['must-revalidate, max-age=0 + ETag', { 'cache-control': 'public, max-age=0, must-revalidate', etag: '"1"' }, 'shared 0s'],
    [
      'proxy-revalidate + Last-Modified',
      { 'cache-control': 'public, max-age=30, proxy-revalidate', 'last-modified': new Date(NOW - 1000).toUTCString() },
      'shared 0s',
    ],
    ['Expires in 20 s', { expires: new Date(NOW + 20_000).toUTCString(), 'cache-control': 'public' }, 'shared 20s'],
    ['Age 10 of max-age 30', { 'cache-control': 'public, max-age=30', age: '10' }, 'shared 20s'],
  ];
  for (const [name, headers, expected] of corpus) {
    it(`${name} → ${expected}`, () => {
      const a = decide(headers);
      const got = a.store ? `${a.scope.shared ? 'shared' : 'consumer'} ${Math.round((a.freshUntilMs - NOW) / 1000)}s` : a.reason;
      expect(got).toBe(expected);
    });
  }

  it('a 500 or a 206 is never stored; a 404 may be', () => {
    expect(decide({ 'cache-control': 'public, max-age=30' }, { status: 500 }).store).toBe(false);
    expect(decide({ 'cache-control': 'public, max-age=30', 'content-range': 'bytes 0-1/10' }, { status: 206 }).store).toBe(false);
    expect(decide({ 'cache-control': 'public, max-age=30' }, { status: 404 }).store).toBe(true);
  });

  it('not public: nobody to keep it for without a consumer, or with privateResponses none', () => {
    expect(decide({ 'cache-control': 'max-age=30' }, { consumer: undefined })).toEqual({ store: false, reason: 'private-to-consumer' });
    expect(decide({ 'cache-control': 'max-age=30' }, { none: true })).toEqual({ store: false, reason: 'private-to-consumer' });
  });

  it('stale-if-error extends the keeping, not where the upstream forbade a stale answer', () => {
    const plain = decide({ 'cache-control': 'public, max-age=30' });
    const strict = decide({ 'cache-control': 'public, max-age=30, must-revalidate' });
    expect(plain.store && plain.expiresAtMs - NOW).toBe(40_000);
    expect(strict.store && strict.expiresAtMs - NOW).toBe(30_000);
  });

  it('the lives do not depend on how fast the machine is: a clock that moves on every read', () => {
    let clock = NOW;
    const now = vi.spyOn(Date, 'now').mockImplementation(() => (clock += 7));
    try {
      const plain = decide({ 'cache-control': 'public, max-age=30' });
      expect(plain.store && plain.expiresAtMs - NOW).toBe(40_000);
      expect(plain.store && plain.freshUntilMs - NOW).toBe(30_000);
    } finally {
      now.mockRestore();
    }
  });

  it('the policy keeps no request field but the Vary ones, as digests: never the API key', () => {
    const a = decide({ 'cache-control': 'public, max-age=30', vary: 'Authorization, Accept-Language' });
    expect(a.store).toBe(true);
    const kept = JSON.stringify(a.store && a.policy.toObject());
    expect(kept).not.toContain('tg_secret');
    expect(kept).not.toContain('"en"');
    expect(a.store && a.varyFields).toEqual(['accept-language', 'authorization']);
  });

  it("a client's revalidation request", () => {
    expect(requestWantsRevalidation({ 'cache-control': 'no-cache' })).toBe(true);
    expect(requestWantsRevalidation({ 'cache-control': 'max-age=0' })).toBe(true);
    expect(requestWantsRevalidation({ pragma: 'no-cache' })).toBe(true);
    expect(requestWantsRevalidation({ 'cache-control': 'max-age=5', pragma: 'no-cache' })).toBe(false);
    expect(requestWantsRevalidation({})).toBe(false);
  });

  it('entries round-trip through the binary encoding, every byte value included; foreign values are refused', () => {
    const a = decide({ 'cache-control': 'public, max-age=30' });
    if (!a.store) throw new Error('expected storable');
    const entry: StoredResponse = {
      kind: 'response',
      status: 200,
      headers: { 'content-type': 'application/octet-stream', 'x-list': ['a', 'b'] },
      body: Buffer.from(Array.from({ length: 256 }, (_, i) => i)),
      policy: a.policy.toObject(),
      storedAtMs: NOW,
      freshUntilMs: a.freshUntilMs,
      expiresAtMs: a.expiresAtMs,
      ageSeconds: 0,
      service: 's',
      path: '/v1/x',
    };
    const back = decodeStored(encodeStored(entry));
    expect(back).toEqual(entry);
    expect(decodeStored(Buffer.from('not ours'))).toBeUndefined();
    expect(decodeStored(encodeStored(entry).subarray(0, 10))).toBeUndefined();
  });
});
