// Fields the gateway owns: header rules may neither set nor remove them (refused at load). Each
// is written or removed by the gateway itself, and a rule over one would either be overwritten
// silently or undo a guarantee: the identity the backend verifies, the rate-limit contract with
// clients, the framing of the message, the routing of the request.

/** Hop-by-hop fields (RFC 9110 §7.6.1) and message framing: one connection's business. */
const FRAMING = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'upgrade',
  'transfer-encoding',
  'content-length',
  'expect',
  'host',
  'proxy-authorization',
  'proxy-authenticate',
]);

/** Written by the gateway on every request or response. */
const GATEWAY_FIELDS = new Set(['x-request-id', 'forwarded', 'retry-after', 'ratelimit', 'ratelimit-policy']);

/** Prefixes of the gateway's families: identity and consumer headers, rate-limit fields, X-Forwarded-*. */
const GATEWAY_PREFIXES = ['x-tollgate-', 'x-consumer-', 'x-ratelimit-', 'x-forwarded-'];

/** Why a header rule may not touch `name` (lower-case), or undefined when it may. */
export function ownedFieldReason(name: string): string | undefined {
  if (FRAMING.has(name)) return `"${name}" is a hop-by-hop or framing field the gateway sets itself`;
  if (GATEWAY_FIELDS.has(name)) return `"${name}" is written by the gateway`;
  // CGI-style upstreams read `_` as `-`: x_tollgate_plan would pass for x-tollgate-plan.
  const dashed = name.replace(/_/g, '-');
  const prefix = GATEWAY_PREFIXES.find((p) => dashed.startsWith(p));
  if (prefix) return `"${name}" belongs to the gateway's ${prefix}* fields (identity, rate limits, forwarding)`;
  if (dashed !== name && (FRAMING.has(dashed) || GATEWAY_FIELDS.has(dashed)))
    return `"${name}" reads as "${dashed}", which the gateway owns`;
  return undefined;
}
