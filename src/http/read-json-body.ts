import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ErrorCode } from '../errors/registry.js';
import { readBody } from './read-body.js';

export type JsonBodyResult = { ok: true; value: unknown } | { ok: false; code: ErrorCode; message?: string };

// RFC 8259 §8.1: JSON exchanged between systems is UTF-8; a declared charset other than that is
// refused rather than mis-decoded.
const JSON_MEDIA_TYPE = /^application\/json\s*(;|$)/i;
const CHARSET_PARAM = /;\s*charset\s*=\s*"?([^";\s]*)"?/i;

/** True for `application/json`, with any parameters, any case; a charset must be UTF-8. */
export function isJsonContentType(header: string | undefined): boolean {
  if (!header || !JSON_MEDIA_TYPE.test(header.trim())) return false;
  const charset = CHARSET_PARAM.exec(header)?.[1];
  return charset === undefined || /^utf-?8$/i.test(charset);
}

/**
 * Reads and parses a JSON request body of at most `maxBodyBytes`.
 *
 * Refusals are returned as data: an unsupported media type, then whatever readBody (read-body.ts)
 * refuses (over the limit, cut short), then invalid JSON. `res`: as readBody's (100 Continue is
 * sent only for a body of the JSON media type within the limit).
 */
export function readJsonBody(req: IncomingMessage, maxBodyBytes: number, res?: ServerResponse): Promise<JsonBodyResult> {
  if (!isJsonContentType(req.headers['content-type'])) {
    return Promise.resolve({ ok: false, code: 'unsupported_media_type' });
  }
  return readBody(req, maxBodyBytes, res).then((read) => (read.ok ? parseJson(read.bytes) : read));
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

function parseJson(bytes: Buffer): JsonBodyResult {
  if (bytes.length === 0) {
    return { ok: false, code: 'invalid_json', message: 'The request body is empty; a JSON object is required.' };
  }
  let text: string;
  try {
    text = UTF8.decode(bytes);
  } catch {
    return { ok: false, code: 'invalid_json', message: 'The request body is not valid UTF-8.' };
  }
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (err) {
    return { ok: false, code: 'invalid_json', message: `The request body is not valid JSON: ${(err as Error).message}` };
  }
}
