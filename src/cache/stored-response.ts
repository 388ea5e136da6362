import type { CachePolicyObject } from 'http-cache-semantics';

/** A response kept by the cache: the upstream's own status, fields and body, and what RFC 9111 says of it. */
export interface StoredResponse {
  readonly kind: 'response';
  readonly status: number;
  /** The upstream's response fields, minus hop-by-hop ones, Age and Cache-Status (recomputed on every use). */
  readonly headers: Record<string, string | string[]>;
  readonly body: Buffer;
  /** http-cache-semantics' state (storability, lifetime, validators, the request's Vary fields). */
  readonly policy: CachePolicyObject;
  /** When the upstream last produced or confirmed (304) it: the start of the ttlSeconds cap. */
  readonly storedAtMs: number;
  /** Until when it answers without asking the upstream (0: every use is revalidated). */
  readonly freshUntilMs: number;
  /** Until when the store keeps it (freshness, revalidation window, stale-if-error). */
  readonly expiresAtMs: number;
  /** Its age (RFC 9111 §4.2.3) at storedAtMs: the upstream's Age plus the time it took to arrive. */
  readonly ageSeconds: number;
  /** Where it came from: purges by path prefix read it. */
  readonly service: string;
  readonly path: string;
}

/**
 * What sits at a URL's key when its response varies (RFC 9111 §4.1): the request fields the
 * upstream named in Vary. The response for one set of their values sits at a key made of them.
 */
export interface VaryRecord {
  readonly kind: 'vary';
  readonly fields: readonly string[];
  readonly expiresAtMs: number;
  readonly service: string;
  readonly path: string;
}

export type Stored = StoredResponse | VaryRecord;

/** Bytes the memory store charges an entry (body plus an estimate of its fields and state). */
export function sizeOf(stored: Stored): number {
  if (stored.kind === 'vary') return 64 + stored.path.length + stored.fields.join().length;
  let size = 512 + stored.body.length + stored.path.length;
  for (const name in stored.headers) size += name.length + String(stored.headers[name]).length + 4;
  return size;
}

/** Binary-safe encoding for a shared store: a 4-byte length, the JSON of everything but the body, the body. */
export function encodeStored(stored: Stored): Buffer {
  const { body, ...rest } = stored.kind === 'response' ? stored : { ...stored, body: Buffer.alloc(0) };
  const meta = Buffer.from(JSON.stringify(rest), 'utf8');
  const head = Buffer.allocUnsafe(4);
  head.writeUInt32BE(meta.length, 0);
  return Buffer.concat([head, meta, body]);
}

/** The inverse of encodeStored; undefined for anything it did not write (a foreign or truncated value). */
export function decodeStored(bytes: Buffer): Stored | undefined {
  if (bytes.length < 4) return undefined;
  const length = bytes.readUInt32BE(0);
  if (4 + length > bytes.length) return undefined;
  try {
    const meta = JSON.parse(bytes.subarray(4, 4 + length).toString('utf8')) as Stored;
    if (meta.kind === 'vary') return meta;
    if (meta.kind !== 'response') return undefined;
    return { ...meta, body: Buffer.from(bytes.subarray(4 + length)) };
  } catch {
    return undefined;
  }
}
