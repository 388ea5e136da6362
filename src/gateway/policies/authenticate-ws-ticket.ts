import { isTicket, ticketHash, type TicketGrant } from '../../keys/ws-ticket.js';
import type { StoreHealth } from '../../store/store-health.js';
import type { WsTicketStore } from '../../store/ws-ticket-store.js';
import { CONTINUE, reject, type Decision, type Policy, type RequestContext } from '../context.js';
import type { KeyCache, KeyLookup } from '../key-cache.js';
import { takeTicketFromHandshake } from '../ws-ticket-in-handshake.js';
import { keyCredential } from './authenticate.js';
import { isWebSocketHandshake } from '../websocket-proxy.js';

const INVALID_TICKET = { 'www-authenticate': 'Bearer realm="tollgate", error="invalid_token"' };
const UNAVAILABLE = reject('key_store_unavailable', undefined, { 'retry-after': 1 });

/**
 * Authentication of a WebSocket handshake by ticket (src/keys/ws-ticket.ts), in front of the key
 * authentication `byKey`: a handshake that carries a ticket and no Authorization header is the
 * key or JWT consumer the ticket was minted for, once. The ticket is taken out of every handshake
 * (query and subprotocol) whether or not it is used, so the upstream and the logs never see it. A bad,
 * expired or used ticket is a 401 invalid_ws_ticket, counted like any failed authentication
 * (limit-failed-auth.ts wraps this policy); a revoked or expired key a 401 as with the key itself.
 */
export function authenticateWsTicket(tickets: WsTicketStore, keys: KeyCache, byKey: Policy, health?: StoreHealth): Policy {
  return (ctx) => {
    if (!isWebSocketHandshake(ctx.req)) return byKey(ctx);
    const sent = takeTicketFromHandshake(ctx.req);
    if (!sent || ctx.req.headers.authorization !== undefined) return byKey(ctx);
    const { ticket, subprotocol } = sent;
    if (ticket === undefined || !isTicket(ticket))
      return reject('invalid_ws_ticket', 'Send exactly one well-formed ticket.', INVALID_TICKET);
    if (health?.isDown()) return UNAVAILABLE;
    return tickets.take(ticketHash(ticket)).then(
      (grant) => {
        if (grant === null) return reject('invalid_ws_ticket', undefined, INVALID_TICKET);
        ctx.ticketSubprotocol = subprotocol;
        if ('consumer' in grant) return judgeToken(ctx, grant);
        const lookup = keys.lookup(grant.keyId);
        return lookup instanceof Promise ? lookup.then((l) => judge(ctx, l)) : judge(ctx, lookup);
      },
      (err: unknown) => {
        health?.failed(err);
        return UNAVAILABLE;
      },
    );
  };
}

/** The ticket's key as it stands now: revoked or expired since the ticket was minted is refused. */
function judge(ctx: RequestContext, lookup: KeyLookup): Decision {
  if ('unavailable' in lookup) return UNAVAILABLE;
  const record = lookup.found;
  if (!record) return reject('invalid_ws_ticket', undefined, INVALID_TICKET);
  if (record.status === 'revoked') return reject('revoked_api_key', undefined, INVALID_TICKET);
  if (record.expiresAt !== undefined && Date.now() >= Date.parse(record.expiresAt))
    return reject('api_key_expired', `The API key expired at ${record.expiresAt}.`, INVALID_TICKET);
  ctx.consumer = record;
  ctx.credential = keyCredential(record);
  return CONTINUE;
}

/**
 * A JWT's consumer as the ticket holds it, while the token it was minted with is valid (the ticket
 * lives no longer, but a clock may step): the tunnel it opens closes when the token would have.
 */
function judgeToken(ctx: RequestContext, grant: Extract<TicketGrant, { consumer: unknown }>): Decision {
  if (Date.now() >= grant.validUntilMs) return reject('invalid_ws_ticket', undefined, INVALID_TICKET);
  ctx.consumer = Object.freeze({ ...grant.consumer });
  ctx.credential = { kind: 'token', validUntilMs: grant.validUntilMs };
  return CONTINUE;
}
