import CachePolicy from 'http-cache-semantics';
import { createHash } from 'node:crypto';
import type { CacheConfig } from '../config/cache-schema.js';
import { SHARED, varyFields, type Scope } from './cache-key.js';

/** A response's request as http-cache-semantics reads it (see requestView). */
export interface RequestView {
  method: string;
  url: string;
  headers: Record<string, string>;
}

export type Admission =
  | { readonly store: false; readonly reason: NotStored }
  | {
      readonly store: true;
      readonly scope: Scope;
      readonly policy: CachePolicy;
      readonly varyFields: readonly string[];
      readonly freshUntilMs: number;
      readonly expiresAtMs: number;
      readonly ageSeconds: number;
    };

export type NotStored = 'not-storable' | 'vary-star' | 'set-cookie' | 'private-to-consumer' | 'not-reusable';

/** Statuses a cache may give a heuristic lifetime (RFC 9110 §15.1, "heuristically cacheable"). */
const HEURISTIC_STATUSES = new Set([200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501]);

/**
 * The request as the stored policy keeps it: method GET (a HEAD is answered from it), the path,
 * the Host, and the Vary fields' values as digests. Never the rest: the client's key, cookies and
 * the assertion would otherwise sit in the store. The request's own Cache-Control is no input:
 * forced revalidation is decided by the cache (config `honourRequestNoCache`), and the library
 * would let a client's `no-store` keep a response out of everyone's reach.
 */
export function requestView(
  path: string,
  host: string,
  fields: readonly string[],
  headers: Record<string, string | string[] | undefined>,
): RequestView {
  const view: Record<string, string> = { host };
  for (const field of fields) {
    const value = headers[field];
    if (value !== undefined) view[field] = digest(Array.isArray(value) ? value.join(', ') : value);
  }
  return { method: 'GET', url: path, headers: view };
}

function digest(value: string): string {
  return createHash('sha256').update(value).digest('base64url');
}

/**
 * Whether, where and for how long a response to a GET is kept (RFC 9111 §3, as a shared cache):
 * - storable by http-cache-semantics (method, status, no-store, private, …), no `Vary: *`, no
 *   `Set-Cookie` (a cookie set for one client is never replayed, not even to the same consumer);
 * - shared by every consumer only if the upstream said `public` or gave `s-maxage` (it saw the
 *   consumer in the assertion, which stands for Authorization, §3.5); else the consumer's own, or
 *   not kept (config `privateResponses`);
 * - fresh for the upstream's lifetime capped by ttlSeconds; a response that gives none (no
 *   max-age, s-maxage or Expires) gets ttlSeconds as its heuristic lifetime (§4.2.2);
 * - kept past its freshness only to be revalidated (it has a validator) within ttlSeconds of its
 *   last confirmation, and to stand in for an upstream error for staleIfErrorSeconds (RFC 5861)
 *   unless the upstream forbade serving it stale.
 */
export function admit(
  config: CacheConfig,
  path: string,
  host: string,
  requestHeaders: Record<string, string | string[] | undefined>,
  status: number,
  headers: Record<string, string | string[] | undefined>,
  consumer: string | undefined,
  nowMs: number,
): Admission {
  // A part of a representation (206) is never kept: this cache combines no ranges.
  if (status === 206) return { store: false, reason: 'not-storable' };
  const fields = varyFields(headers.vary);
  if (fields.includes('*')) return { store: false, reason: 'vary-star' };
  if (headers['set-cookie'] !== undefined) return { store: false, reason: 'set-cookie' };
  const cc = parseCacheControl(headers['cache-control']);
  const policy = new CachePolicy(
    requestView(path, host, fields, requestHeaders),
    { status, headers: policyHeaders(config, status, headers, cc) },
    { shared: true },
  );
  if (!policy.storable()) return { store: false, reason: 'not-storable' };
  let scope: Scope;
  if (cc.has('public') || cc.has('s-maxage')) scope = SHARED;
  else if (config.privateResponses === 'per-consumer' && consumer !== undefined) scope = { shared: false, consumer };
  else return { store: false, reason: 'private-to-consumer' };
  const ttlMs = config.ttlSeconds * 1000;
  // The policy counts the milliseconds since it was made as time spent here (resident time): at
  // admission that is none, however slow the machine (Age is whole seconds anyway).
  const ageSeconds = Math.floor(policy.age());
  const lifeMs = Math.min(ttlMs, Math.max(0, (policy.maxAge() - ageSeconds) * 1000));
  const validated = headers.etag !== undefined || headers['last-modified'] !== undefined;
  if (lifeMs <= 0 && !validated) return { store: false, reason: 'not-reusable' };
  const staleMs = staleAllowed(cc) ? config.staleIfErrorSeconds * 1000 : 0;
  return {
    store: true,
    scope,
    policy,
    varyFields: fields,
    freshUntilMs: nowMs + lifeMs,
    expiresAtMs: nowMs + Math.max(lifeMs, validated ? ttlMs : 0) + staleMs,
    ageSeconds,
  };
}

/**
 * The response's fields as the policy reads them: with `max-age=ttlSeconds` added when the
 * upstream gave no lifetime of its own (the heuristic of RFC 9111 §4.2.2) and did not ask for
 * revalidation on every use.
 */
function policyHeaders(
  config: CacheConfig,
  status: number,
  headers: Record<string, string | string[] | undefined>,
  cc: Map<string, string>,
): Record<string, string> {
  const view: Record<string, string> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value !== undefined) view[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  const explicit = cc.has('max-age') || cc.has('s-maxage') || headers.expires !== undefined;
  if (!explicit && !cc.has('no-cache') && !cc.has('no-store') && HEURISTIC_STATUSES.has(status)) {
    view['cache-control'] = view['cache-control']
      ? `${view['cache-control']}, max-age=${config.ttlSeconds}`
      : `max-age=${config.ttlSeconds}`;
  }
  return view;
}

/** RFC 9111 §4.2.4: must-revalidate, proxy-revalidate and s-maxage (§5.2.2.10) forbid a stale answer; no-cache forbids any unvalidated one. */
export function staleAllowed(cc: Map<string, string>): boolean {
  return !cc.has('must-revalidate') && !cc.has('proxy-revalidate') && !cc.has('s-maxage') && !cc.has('no-cache');
}

/** Cache-Control directives by lower-case name (values unquoted); repeated fields joined first. */
export function parseCacheControl(value: string | string[] | undefined): Map<string, string> {
  const directives = new Map<string, string>();
  if (value === undefined) return directives;
  const joined = Array.isArray(value) ? value.join(',') : value;
  for (const part of joined.split(',')) {
    const eq = part.indexOf('=');
    const name = (eq < 0 ? part : part.slice(0, eq)).trim().toLowerCase();
    if (!name) continue;
    const raw = eq < 0 ? '' : part.slice(eq + 1).trim();
    if (!directives.has(name)) directives.set(name, raw.replace(/^"(.*)"$/, '$1'));
  }
  return directives;
}

/** A client's request for a validated answer: `Cache-Control: no-cache` or `max-age=0`, or `Pragma: no-cache` without Cache-Control. */
export function requestWantsRevalidation(headers: Record<string, string | string[] | undefined>): boolean {
  const cc = parseCacheControl(headers['cache-control']);
  if (cc.has('no-cache') || cc.get('max-age') === '0') return true;
  return headers['cache-control'] === undefined && /no-cache/i.test(String(headers.pragma ?? ''));
}
