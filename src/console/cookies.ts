import type { IncomingMessage } from 'node:http';

/**
 * HttpOnly, on `path` (/admin: the console and the admin API only). SameSite=Strict unless
 * `sameSite` says otherwise (the OpenID sign-in's state cookie must come back on the provider's
 * cross-site redirect: oidc/oidc-sign-in.ts). Secure when the request came over TLS (directly or by
 * a proxy that says so); the admin listener itself speaks plain HTTP on 127.0.0.1.
 */
export function cookie(
  req: IncomingMessage,
  name: string,
  value: string,
  maxAgeSeconds: number,
  sameSite = 'Strict',
  path = '/admin',
): string {
  const tls = 'encrypted' in req.socket || req.headers['x-forwarded-proto'] === 'https';
  return `${name}=${value}; Path=${path}; HttpOnly; SameSite=${sameSite}; Max-Age=${maxAgeSeconds}${tls ? '; Secure' : ''}`;
}

/** The value of cookie `name` in a Cookie header, if it matches `shape`. */
export function cookieValue(cookieHeader: string | undefined, name: string, shape: RegExp): string | undefined {
  if (!cookieHeader) return undefined;
  for (const part of cookieHeader.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) {
      const value = part.slice(eq + 1).trim();
      return shape.test(value) ? value : undefined;
    }
  }
  return undefined;
}
