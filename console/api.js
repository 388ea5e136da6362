// The console's one way to the server: the admin API under /admin/v1 with the session cookie, and
// the session itself. The CSRF token lives in this module's memory only (never in storage); after
// a reload GET /admin/console/session hands it out again to the cookie's owner.
const BASE = '/admin/v1';
let csrf = '';

export class ApiError extends Error {
  constructor(status, body) {
    super(body?.message ?? `HTTP ${status}`);
    this.status = status;
    this.code = body?.code ?? 'error';
  }
}

async function send(method, url, body) {
  const headers = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET') headers['x-csrf-token'] = csrf;
  const response = await fetch(url, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'same-origin',
  });
  const text = await response.text();
  const parsed = text ? JSON.parse(text) : undefined;
  if (!response.ok) {
    if (response.status === 401 && onSignedOut) onSignedOut(parsed?.message);
    throw new ApiError(response.status, parsed);
  }
  return parsed;
}

let onSignedOut;
export function whenSignedOut(callback) {
  onSignedOut = callback;
}

export const api = (method, path, body) => send(method, BASE + path, body);

export async function currentSession() {
  const response = await fetch('/admin/console/session', { credentials: 'same-origin' });
  if (!response.ok) return null;
  const session = await response.json();
  csrf = session.csrf;
  return session;
}

/** True when the console can sign in with the team's OpenID provider (gateway.yaml console.oidc). */
export async function openIdSignIn() {
  const response = await fetch('/admin/console/oidc', { credentials: 'same-origin' });
  return response.ok;
}

export async function signIn(token) {
  const response = await fetch('/admin/console/session', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token }),
    credentials: 'same-origin',
  });
  const body = await response.json();
  if (!response.ok) throw new ApiError(response.status, body);
  csrf = body.csrf;
  return body;
}

export async function signOut() {
  await fetch('/admin/console/session', { method: 'DELETE', headers: { 'x-csrf-token': csrf }, credentials: 'same-origin' });
  csrf = '';
}

/** A query string from the set fields of `params`. */
export function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params))
    if (value !== undefined && value !== '' && value !== null) search.set(name, String(value));
  const text = search.toString();
  return text ? `?${text}` : '';
}
