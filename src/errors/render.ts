import { STATUS_CODES, type ServerResponse } from 'node:http';
import { ERRORS, type ErrorCode } from './registry.js';

/** The Error body of openapi.yaml (components/schemas/Error): `status` always equals the HTTP status. */
export interface ErrorBody {
  code: string;
  message: string;
  status: number;
}

export function errorBody(code: ErrorCode, message?: string, details?: Readonly<Record<string, unknown>>): ErrorBody {
  const entry = ERRORS[code];
  return { ...details, code, message: message ?? entry.message, status: entry.status };
}

/**
 * The one place an Error body is written. Extra headers (rate-limit fields, Retry-After,
 * WWW-Authenticate) are set by the caller before or passed here. A response that already
 * started cannot be turned into an error: its socket is destroyed so the client sees a
 * truncated response instead of a corrupted one.
 */
export function sendError(
  res: ServerResponse,
  code: ErrorCode,
  message?: string,
  headers?: Readonly<Record<string, string | number>>,
  details?: Readonly<Record<string, unknown>>,
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify(errorBody(code, message, details));
  if (headers) for (const name in headers) res.setHeader(name, headers[name]!);
  res.statusCode = ERRORS[code].status;
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.setHeader('content-length', Buffer.byteLength(body));
  res.setHeader('cache-control', 'no-store');
  res.end(body);
}

/**
 * The Error body of a code a configured policy declared itself (plugins/load-policy-code.ts checks
 * it is none of the registry's and its status is 4xx): same shape, same fields as the registry's.
 */
export function declaredErrorBody(code: string, message: string, status: number): string {
  return JSON.stringify({ code, message, status } satisfies ErrorBody);
}

export function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.statusCode = status;
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.setHeader('content-length', Buffer.byteLength(body));
  res.end(body);
}

/**
 * The Error body as a raw HTTP/1.1 response, for sockets that never became a request (malformed
 * HTTP, oversized headers, header timeouts); the connection is closed after it.
 */
export function rawErrorResponse(code: ErrorCode, message?: string): string {
  const body = JSON.stringify(errorBody(code, message));
  const status = ERRORS[code].status;
  return (
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json; charset=utf-8\r\n` +
    `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`
  );
}
