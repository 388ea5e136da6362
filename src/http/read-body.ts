import type { IncomingMessage, ServerResponse } from 'node:http';
import { askForBody } from './continue-body.js';

export type BodyResult = { ok: true; bytes: Buffer } | { ok: false; code: 'payload_too_large' | 'bad_request'; message: string };

/**
 * Reads a request body whole, at most `maxBytes` (a declared Content-Length over it is refused
 * before a byte is read; a chunked body is counted as it streams and buffering stops at the bound).
 * Refusals are data; the caller's server drops the unread rest (discard-rest-of-body.ts).
 * `res`: on a server that answers `Expect: 100-continue` itself (a `checkContinue` listener), the
 * response on which 100 is sent once the body is actually wanted: a declared length it would
 * refuse is refused without inviting the body first.
 */
export function readBody(req: IncomingMessage, maxBytes: number, res?: ServerResponse): Promise<BodyResult> {
  const tooLarge: BodyResult = { ok: false, code: 'payload_too_large', message: `The request body is larger than ${maxBytes} bytes.` };
  if (Number(req.headers['content-length'] ?? 0) > maxBytes) return Promise.resolve(tooLarge);
  const cutShort: BodyResult = { ok: false, code: 'bad_request', message: 'The request body was cut short.' };
  if (req.destroyed && !req.complete) return Promise.resolve(cutShort);
  if (res) askForBody(req, res);
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const finish = (result: BodyResult) => {
      req.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose);
      resolve(result);
    };
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received > maxBytes) {
        req.pause();
        return finish(tooLarge);
      }
      chunks.push(chunk);
    };
    const onEnd = () => finish({ ok: true, bytes: Buffer.concat(chunks, received) });
    const onError = () => finish(cutShort);
    const onClose = () => {
      if (!req.complete) onError();
    };
    req.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose);
  });
}
