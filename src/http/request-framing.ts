import type { IncomingMessage } from 'node:http';
import type { ErrorCode } from '../errors/registry.js';

/**
 * How many header fields a request may carry. The server sets no count limit in Node (server.ts),
 * so `req.rawHeaders` holds every field and is counted here: a request over the limit is refused
 * (431) instead of being read one way here and another way upstream. Apache's LimitRequestFields
 * has the same default.
 */
export const MAX_HEADER_FIELDS = 100;

/** RFC 3986 §3.2.2 host (IP-literal, or reg-name / IPv4: unreserved, pct-encoded, sub-delims), then an optional port. */
const HOST = /^(\[[0-9A-Fa-f:.]+(%25[A-Za-z0-9\-._~]+)?\]|[A-Za-z0-9\-._~!$&'()*+,;=%]*)(:\d{0,5})?$/;

/** True for a value a Host header (or an absolute-form target's authority) may take (RFC 9112 §3.2). */
export const isHostValue = (value: string): boolean => HOST.test(value);

/** How the body the parser delimited is framed towards the upstream. */
export type BodyFraming = { kind: 'none' } | { kind: 'length'; bytes: number } | { kind: 'chunked' };

export type FramingVerdict = { ok: true; body: BodyFraming } | { ok: false; code: ErrorCode; message: string };

/**
 * Decides, from the header fields exactly as received, whether the request has one unambiguous
 * reading, and how its body is to be framed upstream. llhttp already refuses most smuggling
 * shapes (CL with TE, bad chunk sizes, obs-fold); these are the ones left for us (RFC 9112 §6).
 */
export function requestFraming(req: IncomingMessage): FramingVerdict {
  const raw = req.rawHeaders;
  if (raw.length / 2 > MAX_HEADER_FIELDS) {
    return refuse('request_header_fields_too_large', `Send at most ${MAX_HEADER_FIELDS} header fields.`);
  }
  let hosts = 0;
  let host: string | undefined;
  const lengths: string[] = [];
  const codings: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    // Only three names matter here; compare lengths before lower-casing anything.
    if (name.length === 4 && name.toLowerCase() === 'host') {
      hosts++;
      host = raw[i + 1]!;
    } else if (name.length === 14 && name.toLowerCase() === 'content-length') lengths.push(raw[i + 1]!);
    else if (name.length === 17 && name.toLowerCase() === 'transfer-encoding') codings.push(raw[i + 1]!);
  }
  // RFC 9112 §3.2: more than one Host is a 400 (which one would route the request?).
  if (hosts > 1) return refuse('bad_request', 'Send exactly one Host header.');
  // RFC 9112 §3.2: Host is `uri-host [ ":" port ]`. Userinfo (`user@gw`) or a path (`gw/v1/admin`)
  // would reach the upstream's Host and X-Forwarded-Host, where a framework building URLs from
  // them reads another host or path than the one routed here.
  if (host !== undefined && !isHostValue(host))
    return refuse('bad_request', 'The Host header must be a host name or address and an optional port.');
  if (codings.length > 0) {
    // RFC 9112 §6.1: Transfer-Encoding in HTTP/1.0 is faulty framing; with Content-Length, ambiguous.
    if (req.httpVersionMajor === 1 && req.httpVersionMinor === 0)
      return refuse('bad_request', 'Transfer-Encoding is not allowed in HTTP/1.0.');
    if (lengths.length > 0) return refuse('bad_request', 'Send Content-Length or Transfer-Encoding, not both.');
    // Only a single `chunked` is understood; anything else has a reading we cannot promise upstream.
    if (codings.length !== 1 || codings[0]!.trim().toLowerCase() !== 'chunked') {
      return refuse('bad_request', 'The only supported Transfer-Encoding is a single "chunked".');
    }
    return { ok: true, body: { kind: 'chunked' } };
  }
  if (lengths.length > 1) return refuse('bad_request', 'Send one Content-Length header.');
  if (lengths.length === 1) {
    const value = lengths[0]!.trim();
    if (!/^\d{1,15}$/.test(value)) return refuse('bad_request', 'Content-Length must be a non-negative integer.');
    return { ok: true, body: { kind: 'length', bytes: Number(value) } };
  }
  return { ok: true, body: { kind: 'none' } };
}

function refuse(code: ErrorCode, message: string): FramingVerdict {
  return { ok: false, code, message };
}
