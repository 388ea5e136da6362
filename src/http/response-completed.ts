import type { ServerResponse } from 'node:http';

/**
 * The response was written to its end, rather than cut off by the client leaving. On HTTP/1.1
 * `writableFinished` says so alone; an HTTP/2 compat response (Http2ServerResponse) reports
 * `writableFinished` as soon as its stream closes, a client's RST_STREAM included, while
 * `writableEnded` stays false unless the gateway ended it. Both are asked, for both protocols.
 */
export function responseCompleted(res: Pick<ServerResponse, 'writableEnded' | 'writableFinished'>): boolean {
  return res.writableEnded && res.writableFinished;
}
