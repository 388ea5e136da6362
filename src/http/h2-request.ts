import { METHODS, type IncomingHttpHeaders } from 'node:http';
import type { Http2ServerRequest } from 'node:http2';
import { MAX_HEADER_FIELDS, type FramingVerdict } from './request-framing.js';

/**
 * The header list size a request may have (RFC 9113 §6.5.2: names and values plus 32 bytes a
 * field, pseudo-fields included), the 16 KiB head limit of HTTP/1.1. The listener advertises it
 * (SETTINGS_MAX_HEADER_LIST_SIZE), but neither Node nor nghttp2 enforces it: measured, a 40 KiB
 * list reached the handler (nghttp2's own HPACK limit ends the session at about 64 KiB).
 */
export const MAX_HEADER_LIST_BYTES = 16 * 1024;

/**
 * Connection-specific fields have no meaning in HTTP/2; a request carrying one is malformed
 * (RFC 9113 §8.2.2). nghttp2 already resets such a stream (PROTOCOL_ERROR) before Node sees it;
 * this is the same rule written where the edge decides, so it holds whatever the library does.
 */
const CONNECTION_SPECIFIC = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);

/**
 * The methods an HTTP/2 request may have: those HTTP/1.1 requests may have here, i.e. the ones
 * llhttp reads (Node's `METHODS`; it refuses any other with a 400, `get` and `~A` included).
 * nghttp2 only checks that `:method` is a token, so without this a method the HTTP/1.1 listener
 * refuses would reach the upstream, as an HTTP/1.1 request line that upstreams read differently
 * or not at all (one that could not frame it left the stream waiting for the upstream timeout).
 */
const METHODS_READ = new Set(METHODS);

/**
 * What an HTTP/2 request is, decided once before any policy, as request-framing.ts does for
 * HTTP/1.1; on success the request is made to read like an HTTP/1.1 one to everything after it:
 *
 * - no pseudo-header field (`:method`, `:path`, `:authority`, `:scheme`) is ever a header field
 *   (`req.headers` is replaced by the regular fields; `req.method` and `req.url` still read the
 *   pseudo-headers, and setting `req.url` still works);
 * - `Host` comes from `:authority` (RFC 9113 §8.3.1); both present and naming different hosts is
 *   a 400 (which one would route the request?), as are two `Host` fields;
 * - a method the HTTP/1.1 listener would not read is a 400, as it is there (METHODS_READ);
 * - connection-specific fields, and `TE` other than `trailers`, are a 400 (RFC 9113 §8.2.2);
 * - at most MAX_HEADER_FIELDS regular fields and MAX_HEADER_LIST_BYTES (431), as on HTTP/1.1;
 * - the body, which HTTP/2 frames itself, is framed for the HTTP/1.1 upstream: with the declared
 *   `Content-Length` (nghttp2 resets a stream whose DATA does not add up to it), none when the
 *   HEADERS frame ended the stream, else chunked.
 */
export function h2RequestFraming(req: Http2ServerRequest): FramingVerdict {
  if (!METHODS_READ.has(req.method)) return refuse('bad_request', 'The request method is not supported (methods are case-sensitive).');
  const raw = req.rawHeaders;
  const headers: IncomingHttpHeaders = {};
  let fields = 0;
  let hosts = 0;
  let length: string | undefined;
  let listBytes = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    const value = raw[i + 1]!;
    listBytes += name.length + value.length + 32;
    if (name.charCodeAt(0) === 58 /* ':' */) continue;
    fields++;
    if (CONNECTION_SPECIFIC.has(name)) return refuse('bad_request', `The connection-specific field ${name} is not allowed in HTTP/2.`);
    if (name === 'te' && value.trim().toLowerCase() !== 'trailers') return refuse('bad_request', 'HTTP/2 allows TE only as "trailers".');
    if (name === 'host') hosts++;
    if (name === 'content-length') {
      if (length !== undefined) return refuse('bad_request', 'Send one Content-Length header.');
      length = value.trim();
    }
    // Repeated fields joined as node:http joins them for HTTP/1.1 (cookie with "; ", others with ", ").
    const before = headers[name];
    if (before === undefined) headers[name] = name === 'set-cookie' ? [value] : value;
    else if (Array.isArray(before)) before.push(value);
    else headers[name] = `${before}${name === 'cookie' ? '; ' : ', '}${value}`;
  }
  if (listBytes > MAX_HEADER_LIST_BYTES) return refuse('request_header_fields_too_large', 'The request head is over 16 KiB.');
  if (fields > MAX_HEADER_FIELDS) return refuse('request_header_fields_too_large', `Send at most ${MAX_HEADER_FIELDS} header fields.`);
  if (hosts > 1) return refuse('bad_request', 'Send exactly one Host header.');
  const authority = req.authority;
  const host = headers.host;
  if (authority && host !== undefined && authority.toLowerCase() !== host.trim().toLowerCase())
    return refuse('bad_request', 'The :authority and Host of the request name different hosts.');
  if (authority) headers.host = authority;
  // An own property shadows the compat getter (which has no setter); policies assign req.headers.
  Object.defineProperty(req, 'headers', { value: headers, writable: true, enumerable: true, configurable: true });

  if (length !== undefined) {
    if (!/^\d{1,15}$/.test(length)) return refuse('bad_request', 'Content-Length must be a non-negative integer.');
    return { ok: true, body: { kind: 'length', bytes: Number(length) } };
  }
  return { ok: true, body: req.stream.endAfterHeaders ? { kind: 'none' } : { kind: 'chunked' } };
}

function refuse(code: 'bad_request' | 'request_header_fields_too_large', message: string): FramingVerdict {
  return { ok: false, code, message };
}
