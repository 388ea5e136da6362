import { hash, randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';

// API key format: `tg_<id>_<secret><checksum>`
//   tg_        a fixed prefix, so secret scanners can find leaked keys;
//   id         12 chars [0-9a-z]: the public key id used in logs, metrics and the CLI;
//   secret     32 chars base62 (~190 bits of randomness, well above the 128 required);
//   checksum   6 chars base62 of the CRC-32 of everything before it, so a mistyped or truncated
//              key is refused without a store lookup (the scheme GitHub's tokens use).
// Only the SHA-256 of the whole key is stored; the key has enough entropy that a plain hash
// cannot be reversed by guessing, and it keeps lookups cheap.

export const KEY_PREFIX = 'tg_';
const ID_LENGTH = 12;
const SECRET_LENGTH = 32;
const CHECKSUM_LENGTH = 6;
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const BASE36 = '0123456789abcdefghijklmnopqrstuvwxyz';
const KEY_PATTERN = new RegExp(`^${KEY_PREFIX}([0-9a-z]{${ID_LENGTH}})_([0-9A-Za-z]{${SECRET_LENGTH}})([0-9A-Za-z]{${CHECKSUM_LENGTH}})$`);
export const KEY_ID_PATTERN = new RegExp(`^[0-9a-z]{${ID_LENGTH}}$`);
/** Longest token worth parsing; anything longer is refused before any work. */
export const KEY_LENGTH = KEY_PREFIX.length + ID_LENGTH + 1 + SECRET_LENGTH + CHECKSUM_LENGTH;

/** Unbiased random string over `alphabet` (rejection sampling keeps every symbol equally likely). */
function randomString(length: number, alphabet: string): string {
  const limit = 256 - (256 % alphabet.length);
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < limit) out += alphabet[byte % alphabet.length];
      if (out.length === length) break;
    }
  }
  return out;
}

function checksum(body: string): string {
  let n = crc32(body);
  let out = '';
  for (let i = 0; i < CHECKSUM_LENGTH; i++) {
    out = BASE62[n % 62] + out;
    n = Math.floor(n / 62);
  }
  return out;
}

export function newKeyId(): string {
  return randomString(ID_LENGTH, BASE36);
}

/** A new API key for the given id. Printed once, at creation; never stored. */
export function newApiKey(id: string = newKeyId()): { id: string; key: string } {
  const body = `${KEY_PREFIX}${id}_${randomString(SECRET_LENGTH, BASE62)}`;
  return { id, key: body + checksum(body) };
}

/** The key id of a well-formed key with a valid checksum, or null. Costs no store lookup. */
export function parseApiKey(key: string): string | null {
  if (key.length !== KEY_LENGTH) return null;
  const match = KEY_PATTERN.exec(key);
  if (!match) return null;
  const body = key.slice(0, KEY_LENGTH - CHECKSUM_LENGTH);
  return checksum(body) === match[3] ? match[1]! : null;
}

export function hashApiKey(key: string): string {
  return hash('sha256', key, 'hex');
}

/**
 * Constant-time comparison of two hex digests, so response timing tells nothing about a key: every
 * character is compared whatever differs first (no Buffers to allocate on the request path).
 */
export function sameHash(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return difference === 0;
}
