import { describe, expect, it } from 'vitest';
import { hashApiKey, KEY_LENGTH, KEY_PREFIX, newApiKey, parseApiKey, sameHash } from '../../src/keys/format.js';

describe('API key format', () => {
  it('creates keys with the recognisable prefix, the id inside, and at least 128 random bits', () => {
    const { id, key } = newApiKey();
    expect(key.startsWith(KEY_PREFIX)).toBe(true);
    expect(key).toHaveLength(KEY_LENGTH);
    expect(key).toContain(`_${id}_`);
    // 32 base62 characters of secret: 32 × log2(62) ≈ 190 bits
    expect(32 * Math.log2(62)).toBeGreaterThan(128);
  });

  it('never repeats a key or an id across many draws', () => {
    const keys = new Set<string>();
    const ids = new Set<string>();
    for (let i = 0; i < 5000; i++) {
      const { id, key } = newApiKey();
      keys.add(key);
      ids.add(id);
    }
    expect(keys.size).toBe(5000);
    expect(ids.size).toBe(5000);
  });

  it('parses a well-formed key back to its id', () => {
    const { id, key } = newApiKey();
    expect(parseApiKey(key)).toBe(id);
  });

  it('refuses a key with one character changed (checksum) without any lookup', () => {
    const { key } = newApiKey();
    for (const position of [KEY_PREFIX.length + 1, KEY_PREFIX.length + 20, KEY_LENGTH - 1]) {
      const original = key[position]!;
      const replacement = original === 'a' ? 'b' : 'a';
      const typo = key.slice(0, position) + replacement + key.slice(position + 1);
      expect(parseApiKey(typo)).toBeNull();
    }
  });

  it.each([
    ['empty', ''],
    ['truncated', 'tg_abc'],
    ['wrong prefix', 'sk_' + 'a'.repeat(KEY_LENGTH - 3)],
    ['too long', 'tg_' + 'a'.repeat(500)],
    ['other charset', 'tg_ABCDEFGHIJKL_' + 'a'.repeat(38)],
  ])('refuses a malformed key (%s)', (_name, key) => {
    expect(parseApiKey(key)).toBeNull();
  });

  it('stores only a SHA-256 hash and compares hashes in constant time', () => {
    const { key } = newApiKey();
    const hash = hashApiKey(key);
    expect(hash).toMatch(/^[0-9a-f]{64}$/);
    expect(hash).not.toContain(key.slice(KEY_PREFIX.length + 13));
    expect(sameHash(hash, hashApiKey(key))).toBe(true);
    expect(sameHash(hash, hashApiKey(newApiKey().key))).toBe(false);
    expect(sameHash(hash, 'abcd')).toBe(false);
  });
});
