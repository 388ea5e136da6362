import type { IncomingMessage } from 'node:http';

export type BodyResult = { ok: true; bytes: Buffer } | { ok: false; code: 'payload_too_large' | 'bad_request'; message: string };

/**
 * Reads a request body whole, at most `maxBytes` (a declared Content-Length over it is refused
 * before a byte is read; a chunked body is counted as it streams and buffering stops at the bound).
 * Refusals are data; the caller's server drops the unread rest (discard-rest-of-body.ts).
 */
export function readBody(req: IncomingMessage, maxBytes: number): Promise<BodyResult> {
  const tooLarge: BodyResult = { ok: false, code: 'payload_too_large', message: `The request body is larger than ${maxBytes} bytes.` };
  if (Number(req.headers['content-length'] ?? 0) > maxBytes) return Promise.resolve(tooLarge);
  const cutShort: BodyResult = { ok: false, code: 'bad_request', message: 'The request body was cut short.' };
  if (req.destroyed && !req.complete) return Promise.resolve(cutShort);
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
