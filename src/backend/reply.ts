import type { ServerResponse } from 'node:http';
import type { ErrorCode } from '../errors/registry.js';
import { sendError, sendJson } from '../errors/render.js';

/**
 * What a handler answers, as data; `writeReply` is the one place it becomes a response, so
 * handlers can be read (and tested) without a socket.
 */
export type Reply =
  | { status: number; body: unknown; headers?: Record<string, string> }
  | { error: ErrorCode; message?: string; headers?: Record<string, string> };

export function errorReply(error: ErrorCode, message?: string, headers?: Record<string, string>): Reply {
  return { error, ...(message !== undefined && { message }), ...(headers && { headers }) };
}

export function writeReply(res: ServerResponse, reply: Reply): void {
  if ('error' in reply) {
    sendError(res, reply.error, reply.message, reply.headers);
    return;
  }
  if (reply.headers) for (const [name, value] of Object.entries(reply.headers)) res.setHeader(name, value);
  if (reply.status === 304) {
    // Not Modified: the validators and Cache-Control only, no content (RFC 9110 §15.4.5).
    res.statusCode = 304;
    res.end();
    return;
  }
  sendJson(res, reply.status, reply.body);
}
