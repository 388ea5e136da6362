import type { SpanContext } from '@opentelemetry/api';
import { TraceState } from '@opentelemetry/core';

// W3C Trace Context (https://www.w3.org/TR/trace-context/), the two request fields: `traceparent`
// (version-traceid-parentid-flags) and `tracestate` (vendor list). A field that does not parse is
// ignored as if absent (§3.2.2.1 / §3.3.1.1: restart the trace), never logged or echoed: it is
// client input. Only the version 00 layout is accepted exactly; a later version is read by its
// first four fields (§3.2.4: "parse the fields known for version 00").

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-|$)/;
const ALL_ZERO_TRACE = '00000000000000000000000000000000';
const ALL_ZERO_SPAN = '0000000000000000';
/** §3.3.1.5: at most 32 list members; longer fields are truncated by the sender, so we drop them. */
const MAX_TRACESTATE_MEMBERS = 32;
const MAX_TRACESTATE_LENGTH = 512;
// §3.3.1.3: key = simple-key or tenant@system; value = printable ASCII without `,` and `=`, no trailing space.
const TRACESTATE_MEMBER =
  /^(?:[a-z][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13})=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/;

/** The remote parent a request's `traceparent` names, with its `tracestate` (when both are valid), or undefined. */
export function parentFromHeaders(
  traceparent: string | string[] | undefined,
  tracestate: string | string[] | undefined,
): SpanContext | undefined {
  // Repeated traceparent fields cannot be told apart: ignored (§3.2.2: a single field).
  if (typeof traceparent !== 'string' || traceparent.length < 55) return undefined;
  const match = TRACEPARENT.exec(traceparent);
  if (!match) return undefined;
  const [, version, traceId, spanId, flags, rest] = match;
  if (version === 'ff' || traceId === ALL_ZERO_TRACE || spanId === ALL_ZERO_SPAN) return undefined;
  // Version 00 has exactly four fields; a higher version may carry more after a dash.
  if (version === '00' && rest !== '') return undefined;
  const context: SpanContext = { traceId: traceId!, spanId: spanId!, traceFlags: parseInt(flags!, 16) & 1, isRemote: true };
  const state = validTracestate(tracestate);
  if (state !== undefined) context.traceState = new TraceState(state);
  return context;
}

/** The field as received when every member is well-formed; repeated fields are one list (§3.3.1). */
function validTracestate(field: string | string[] | undefined): string | undefined {
  if (field === undefined) return undefined;
  const joined = typeof field === 'string' ? field : field.join(',');
  if (joined.length > MAX_TRACESTATE_LENGTH) return undefined;
  const members = joined
    .split(',')
    .map((member) => member.trim())
    .filter((member) => member !== '');
  if (members.length === 0 || members.length > MAX_TRACESTATE_MEMBERS) return undefined;
  return members.every((member) => TRACESTATE_MEMBER.test(member)) ? members.join(',') : undefined;
}

/** `traceparent` for a span context: version 00, sampled flag only. */
export function traceparentOf(context: SpanContext): string {
  return `00-${context.traceId}-${context.spanId}-0${context.traceFlags & 1}`;
}
