import type { IncomingMessage } from 'node:http';

// When a server answers before reading the whole body (the backend's 413, 415, 404, …; an
// upstream's early answer relayed by the gateway), the client is usually still sending. Closing
// the socket at once would make the kernel answer its next bytes with a reset, and most clients
// then lose the response they were about to read (a "lingering close" problem; Apache and nginx
// solve it the same way). So the rest is read and thrown away, never buffered, but only up to
// these bounds; past them the connection is cut. Once the rest has arrived, the connection
// carries the client's next request as usual (nginx discards an unread body the same way).
const DISCARD_MAX_BYTES = 8 * 1024 * 1024;
const DISCARD_MAX_MS = 5_000;

/** Reads and drops the unread rest of a request body, bounded; past the bounds closes the socket. */
export function discardRestOfBody(req: IncomingMessage): void {
  if (req.complete || req.destroyed) return;
  let discardedBytes = 0;
  const cut = () => {
    cleanup();
    req.socket.destroy();
  };
  const onData = (chunk: Buffer) => {
    discardedBytes += chunk.length;
    if (discardedBytes > DISCARD_MAX_BYTES) cut();
  };
  const timer = setTimeout(cut, DISCARD_MAX_MS);
  const cleanup = () => {
    clearTimeout(timer);
    req.off('data', onData).off('end', cleanup).off('close', cleanup);
  };
  req.on('data', onData).once('end', cleanup).once('close', cleanup);
  req.resume();
}
