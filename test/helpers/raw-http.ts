import { connect } from 'node:net';

export interface RawResponse {
  status: number;
  head: string;
  body: string;
  /** The connection closed (or timed out) without any response bytes. */
  silent: boolean;
}

/**
 * Sends raw bytes (anything, including malformed HTTP) and reads one response. Resolves when the
 * response is complete per its Content-Length, when the server closes, or after `timeoutMs`.
 */
export function sendRaw(port: number, bytes: Buffer | string, timeoutMs = 3000): Promise<RawResponse> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let data = Buffer.alloc(0);
    const finish = () => {
      clearTimeout(timer);
      socket.destroy();
      const text = data.toString('latin1');
      const split = text.indexOf('\r\n\r\n');
      const head = split >= 0 ? text.slice(0, split) : text;
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? 0);
      resolve({
        status,
        head,
        body: split >= 0 ? data.subarray(Buffer.byteLength(text.slice(0, split + 4), 'latin1')).toString('utf8') : '',
        silent: data.length === 0,
      });
    };
    const timer = setTimeout(finish, timeoutMs);
    socket.on('data', (chunk) => {
      data = Buffer.concat([data, chunk]);
      const text = data.toString('latin1');
      const split = text.indexOf('\r\n\r\n');
      if (split < 0) return;
      const length = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, split))?.[1];
      if (length !== undefined && data.length >= Buffer.byteLength(text.slice(0, split + 4), 'latin1') + Number(length)) finish();
    });
    socket.on('error', finish);
    socket.on('close', finish);
    socket.write(bytes);
  });
}
