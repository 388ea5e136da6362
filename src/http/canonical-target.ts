import { isHostValue } from './request-framing.js';

/**
 * The one canonical form of a request target, computed once at the edge before any policy runs.
 * Route rules, route labels, logs and the upstream all see this string, so no two of them can read
 * the same request as two different paths (the class of bug behind "/v1/./pets/42" skipping a
 * route rule that the upstream then serves). The policy, case by case, is in docs/security.md.
 */
export type CanonicalTarget =
  | {
      ok: true;
      /** origin-form: canonical path, then `?query` as sent */ target: string;
      /** from an absolute-form target */ authority?: string;
    }
  | { ok: false; reason: string };

// RFC 3986 §2.3 unreserved characters: their percent-encodings are decoded (§6.2.2.2).
const UNRESERVED = /[A-Za-z0-9\-._~]/;
// What a path may hold after decoding: RFC 3986 pchar and "/" (§3.3), minus what we refuse below.
const PATH_CHARS = /^[A-Za-z0-9\-._~!$&'()*+,=:@/%]*$/;
// The query is passed as sent, but only printable ASCII without spaces (§3.4) reaches the upstream.
const QUERY_CHARS = /^[\x21-\x7e]*$/;

export function canonicalTarget(raw: string): CanonicalTarget {
  let target = raw;
  let authority: string | undefined;
  if (!target.startsWith('/')) {
    // RFC 9112 §3.2.2: absolute-form; the authority replaces Host, the rest becomes origin-form.
    const absolute = /^(https?):\/\/([^/?#]*)([/?][^#]*)?$/i.exec(target);
    if (!absolute) return refuse('the request target must be a path (origin-form) or an http(s) URL (absolute-form)');
    authority = absolute[2]!;
    if (authority === '' || !isHostValue(authority)) return refuse('the absolute-form target has no usable authority');
    target = absolute[3] ?? '/';
    if (target.startsWith('?')) target = '/' + target;
  }
  if (target.includes('#')) return refuse('a request target cannot carry a fragment (RFC 9112 §3.2)');
  const queryAt = target.indexOf('?');
  const rawPath = queryAt === -1 ? target : target.slice(0, queryAt);
  const query = queryAt === -1 ? '' : target.slice(queryAt);
  if (!QUERY_CHARS.test(query)) return refuse('the query holds characters that are not allowed');
  const path = canonicalPath(rawPath);
  if (typeof path !== 'string') return path;
  return { ok: true, target: path + query, authority };
}

/** RFC 3986 §6.2.2: percent-encoding normalisation, then §5.2.4 dot-segment removal; `//` merged. */
export function canonicalPath(rawPath: string): string | { ok: false; reason: string } {
  // `\` is not a URI character; some servers read it as `/` (IIS, some frameworks): refuse rather than guess.
  if (rawPath.includes('\\')) return refuse('a backslash is not allowed in the path');
  // `;` starts path parameters that some servers strip (Tomcat's `/..;/`): one reading only, so refuse.
  if (rawPath.includes(';')) return refuse('a semicolon (path parameter) is not allowed in the path');
  if (!PATH_CHARS.test(rawPath)) return refuse('the path holds characters that are not allowed');
  const decoded = decodeUnreserved(rawPath);
  if (typeof decoded !== 'string') return decoded;
  // Empty segments are merged (nginx `merge_slashes`, Envoy `merge_slashes`): `//x` is never an authority.
  const merged = decoded.includes('//') ? decoded.replace(/\/{2,}/g, '/') : decoded;
  // A dot segment always follows a "/": most paths have none, and are canonical as they are.
  return merged.includes('/.') ? removeDotSegments(merged) : merged;
}

/**
 * Decodes `%XX` of unreserved characters and upper-cases every other escape (RFC 3986 §6.2.2.1).
 * An encoded `/` or `\` (%2F, %5C) would be one segment to us and two to an upstream that decodes
 * it; NUL and other control bytes have no place in a path: all refused, as is a broken escape.
 */
function decodeUnreserved(path: string): string | { ok: false; reason: string } {
  if (!path.includes('%')) return path;
  let out = '';
  for (let i = 0; i < path.length; i++) {
    const c = path[i]!;
    if (c !== '%') {
      out += c;
      continue;
    }
    const hex = path.slice(i + 1, i + 3);
    if (!/^[0-9A-Fa-f]{2}$/.test(hex)) return refuse('the path holds a malformed percent-encoding');
    const code = parseInt(hex, 16);
    if (code === 0x2f || code === 0x5c) return refuse('an encoded slash or backslash is not allowed in the path');
    if (code < 0x20 || code === 0x7f) return refuse('an encoded control character is not allowed in the path');
    const char = String.fromCharCode(code);
    out += UNRESERVED.test(char) ? char : '%' + hex.toUpperCase();
    i += 2;
  }
  return out;
}

/** RFC 3986 §5.2.4, on a path that starts with "/": "." segments go, ".." removes its parent (never above the root). */
export function removeDotSegments(path: string): string {
  const segments = path.split('/');
  const out: string[] = [];
  // segments[0] is the empty string before the leading "/".
  for (let i = 1; i < segments.length; i++) {
    const segment = segments[i]!;
    const last = i === segments.length - 1;
    if (segment === '.' || segment === '..') {
      if (segment === '..') out.pop();
      // A trailing "." or ".." leaves a trailing "/" (RFC 3986 §5.2.4 step 2B/2C).
      if (last) out.push('');
      continue;
    }
    out.push(segment);
  }
  return '/' + out.join('/');
}

function refuse(reason: string): { ok: false; reason: string } {
  return { ok: false, reason };
}
