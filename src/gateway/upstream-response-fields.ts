import type { IncomingHttpHeaders } from 'node:http';

/**
 * Fields of which Node's own HTTP client keeps only the first when an upstream repeats them
 * (`IncomingMessage` in node:http): a second Content-Type or Location is dropped rather than
 * joined into a value no client can read.
 */
const FIRST_ONLY = new Set([
  'age',
  'authorization',
  'content-length',
  'content-type',
  'etag',
  'expires',
  'from',
  'host',
  'if-modified-since',
  'if-unmodified-since',
  'last-modified',
  'location',
  'max-forwards',
  'proxy-authorization',
  'referer',
  'retry-after',
  'server',
  'user-agent',
]);

/**
 * An upstream response head as undici hands it over (raw names and values, in order) → the
 * lower-cased header object node:http would have made of it, by the same rules: Set-Cookie a
 * list, Cookie joined with `; `, FIRST_ONLY fields the first value, any other repeated field
 * joined with `, ` (RFC 9110 §5.3). Values are Latin-1, byte for byte, as node:http reads them.
 */
export function responseHeadersOf(raw: Buffer[]): IncomingHttpHeaders {
  // No prototype: a field named like an Object.prototype member (`constructor`, `toString`,
  // `__proto__`) is a field like any other, never that member joined to its value.
  const headers = Object.create(null) as IncomingHttpHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!.toString('latin1').toLowerCase();
    const value = raw[i + 1]!.toString('latin1');
    const known = headers[name];
    if (known === undefined) {
      headers[name] = name === 'set-cookie' ? [value] : value;
    } else if (name === 'set-cookie') {
      (known as string[]).push(value);
    } else if (!FIRST_ONLY.has(name)) {
      headers[name] = `${known as string}${name === 'cookie' ? '; ' : ', '}${value}`;
    }
  }
  return headers;
}
