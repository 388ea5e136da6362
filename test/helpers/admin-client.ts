import type { Observed } from './contract.js';

/** Admin tokens for tests (TOLLGATE_ADMIN_TOKENS entries are label:token, tokens ≥ 32 bytes). */
export const OPS_TOKEN = 'ops-token-0123456789abcdefghijklmnopqrstuv';
export const PORTAL_TOKEN = 'portal-token-0123456789abcdefghijklmnopqrs';
export const ADMIN_TOKENS = `ops:${OPS_TOKEN},portal:${PORTAL_TOKEN}`;

export interface AdminCall extends Observed {
  /** The parsed JSON body (undefined when there was none). */
  body: any;
}

/**
 * One admin API request over real HTTP. `body` is sent as JSON unless it is a string (sent as is,
 * for malformed bodies); `token` null sends no Authorization header.
 */
export async function admin(
  adminUrl: string,
  method: string,
  path: string,
  options: { body?: unknown; token?: string | null; contentType?: string } = {},
): Promise<AdminCall> {
  const headers: Record<string, string> = {};
  const token = options.token === undefined ? OPS_TOKEN : options.token;
  if (token !== null) headers.authorization = `Bearer ${token}`;
  let payload: string | undefined;
  if (options.body !== undefined) {
    payload = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
    headers['content-type'] = options.contentType ?? 'application/json';
  }
  const response = await fetch(`${adminUrl}/admin/v1${path}`, { method, headers, body: payload });
  const text = await response.text();
  return {
    method,
    path: `/admin/v1${path}`,
    status: response.status,
    headers: response.headers,
    body: text ? JSON.parse(text) : undefined,
  };
}
