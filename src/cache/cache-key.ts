import { createHash } from 'node:crypto';

/**
 * Where a URL's entries live. Every entry of one URL (shared, per consumer, every Vary variant)
 * shares one Redis Cluster hash tag, so the URL's keys can be read and deleted together.
 */
export interface CachePlace {
  readonly service: string;
  /** The Host the upstream received (part of the effective request URI, RFC 9111 §4). */
  readonly host: string;
  /** The canonical path and query. */
  readonly path: string;
}

/** Whose an entry is: every consumer's (the upstream said `public` or gave `s-maxage`) or one consumer's. */
export type Scope = { readonly shared: true } | { readonly shared: false; readonly consumer: string };

export const SHARED: Scope = { shared: true };

const PREFIX = 'tollgate:cache:';

/** The URL's hash tag: a digest, so no path character can open or close a tag of its own. */
export function tagOf(place: CachePlace): string {
  const digest = createHash('sha256').update(`${place.service}\n${place.host}\n${place.path}`).digest('base64url').slice(0, 22);
  return `${PREFIX}{${digest}}`;
}

/** The key of the URL's entry (or Vary record) for one scope. */
export function scopeKey(tag: string, scope: Scope): string {
  return scope.shared ? `${tag}:s` : `${tag}:c:${scope.consumer}`;
}

/** The key of one variant: the values the request has for the fields the upstream named in Vary. */
export function variantKey(key: string, fields: readonly string[], headers: Record<string, string | string[] | undefined>): string {
  const hash = createHash('sha256');
  for (const field of fields) hash.update(`${field}\n${varyValue(headers[field])}\n`);
  return `${key}:v:${hash.digest('base64url').slice(0, 22)}`;
}

/** A request field's value as Vary compares it: absent and empty differ, repeated values joined. */
export function varyValue(value: string | string[] | undefined): string {
  if (value === undefined) return '\u0000';
  return Array.isArray(value) ? value.join(', ') : value;
}

/** The field names of a Vary value, lower-cased; `*` kept (such a response is never stored). */
export function varyFields(vary: string | string[] | undefined): string[] {
  if (vary === undefined) return [];
  const joined = Array.isArray(vary) ? vary.join(',') : vary;
  return [
    ...new Set(
      joined
        .split(',')
        .map((f) => f.trim().toLowerCase())
        .filter(Boolean),
    ),
  ].sort();
}
