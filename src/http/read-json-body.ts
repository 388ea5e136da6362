import type { IncomingMessage } from 'node:http';
import type { ErrorCode } from '../errors/registry.js';

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
 * Refusals are returned as data. A declared Content-Length over the limit is refused before a
 * single byte is read; a chunked body is counted while it streams and buffering stops at the
 * limit (the request handler then discards whatever is left, bounded).
 */
export function readJsonBody(req: IncomingMessage, maxBodyBytes: number): Promise<JsonBodyResult> {
  if (!isJsonContentType(req.headers['content-type'])) {
    return Promise.resolve({ ok: false, code: 'unsupported_media_type' });
  }
  const declaredBytes = Number(req.headers['content-length'] ?? 0);
  if (declaredBytes > maxBodyBytes) {
    return Promise.resolve(tooLarge(maxBodyBytes));
  }
  const cutShort: JsonBodyResult = { ok: false, code: 'bad_request', message: 'The request body was cut short.' };
  // The client may have gone away while we were busy before reading (e.g. verifying it).
  if (req.destroyed && !req.complete) return Promise.resolve(cutShort);
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let receivedBytes = 0;
    const finish = (result: JsonBodyResult) => {
      req.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose);
      resolve(result);
    };
    const onData = (chunk: Buffer) => {
      receivedBytes += chunk.length;
      if (receivedBytes > maxBodyBytes) {
        req.pause();
        finish(tooLarge(maxBodyBytes));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => finish(parseJson(Buffer.concat(chunks, receivedBytes)));
    // The client went away mid-body; nobody will read the answer, but the promise must settle.
    const onError = () => finish(cutShort);
    const onClose = () => {
      if (!req.complete) onError();
    };
    req.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose);
  });
}

function tooLarge(maxBodyBytes: number): JsonBodyResult {
  return {
    ok: false,
    code: 'payload_too_large',
    message: `The request body is larger than ${maxBodyBytes} bytes.`,
  };
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
