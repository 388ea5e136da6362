import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * What every interop upstream serves, each in its own idiom (test/helpers/interop/*-upstream.ts):
 * - `GET|HEAD /v1/interop/json`: a small JSON document with an ETag; `If-None-Match` with that
 *   ETag → 304;
 * - `GET /v1/interop/empty` → 204;
 * - `GET /v1/interop/big` → the multi-megabyte file below, streamed;
 * - `POST /v1/interop/echo` → 200, the body read to its end (JSON `{length, sha256}` where the
 *   server can compute them; nginx only discards it);
 * - `POST /v1/interop/upload` → 413 before reading a body larger than `UPLOAD_LIMIT_BYTES`, on its
 *   Content-Length (each server's own limit mechanism where it has one).
 */
export const PATHS = {
  json: '/v1/interop/json',
  empty: '/v1/interop/empty',
  big: '/v1/interop/big',
  echo: '/v1/interop/echo',
  upload: '/v1/interop/upload',
} as const;

export const UPLOAD_LIMIT_BYTES = 64 * 1024;
const BIG_BYTES = 8 * 1024 * 1024;

/** The files behind the routes, in a temporary directory (the layout nginx serves as its root). */
export class Site {
  private constructor(
    readonly dir: string,
    readonly json: Buffer,
    readonly bigSha256: string,
  ) {}

  static create(server: string): Site {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-interop-'));
    const files = join(dir, 'v1', 'interop');
    mkdirSync(files, { recursive: true });
    const json = Buffer.from(`${JSON.stringify({ server, categories: [{ id: 'books', name: 'Books' }], total: 1 })}\n`);
    // Random bytes: a body that any re-framing, re-chunking or truncation would change.
    const big = randomBytes(BIG_BYTES);
    writeFileSync(join(files, 'json'), json);
    writeFileSync(join(files, 'big'), big);
    return new Site(dir, json, sha256(big));
  }

  /** The directory holding `json` and `big`. */
  get files(): string {
    return join(this.dir, 'v1', 'interop');
  }

  get bigBytes(): number {
    return BIG_BYTES;
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export const sha256 = (bytes: Buffer | string) => createHash('sha256').update(bytes).digest('hex');
