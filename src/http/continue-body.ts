import type { IncomingMessage, ServerResponse } from 'node:http';

const continued = new WeakSet<ServerResponse>();

/**
 * Sends `100 Continue`, once, to a client that waits for it before its body (`Expect:
 * 100-continue`), at the moment the body is actually wanted. A server with a `checkContinue`
 * listener (admin-server.ts) then answers a request it refuses before reading its body finally,
 * without first inviting the body.
 */
export function askForBody(req: IncomingMessage, res: ServerResponse): void {
  if (continued.has(res) || res.headersSent) return;
  if (typeof req.headers.expect !== 'string' || req.headers.expect.toLowerCase() !== '100-continue') return;
  continued.add(res);
  res.writeContinue();
}
