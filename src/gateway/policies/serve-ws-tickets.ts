import { newTicket, ticketHash, TICKET_TTL_SECONDS } from '../../keys/ws-ticket.js';
import type { StoreHealth } from '../../store/store-health.js';
import type { WsTicketStore } from '../../store/ws-ticket-store.js';
import { CONTINUE, reject, type Answer, type Decision, type Policy, type RequestContext } from '../context.js';

const UNAVAILABLE = reject('key_store_unavailable', undefined, { 'retry-after': 1 });

/**
 * POST `path` (e.g. /v1/ws-tickets) with a key: a WebSocket ticket for that key, answered by the
 * gateway (src/keys/ws-ticket.ts). Minting is counted like any request of the key, by `quota`
 * (enforce-quota.ts) run here, before the ticket exists: a key over its quota or banned gets no
 * ticket. The handshake that uses it is counted again, as any handshake. It is placed before
 * route-to-service.ts: the path belongs to the gateway, not to a service a plan might leave out.
 * An empty `path` turns it off.
 */
export function serveWsTickets(path: string, deps: { tickets: WsTicketStore; quota: Policy; health?: StoreHealth }): Policy {
  if (path === '') return () => CONTINUE;
  return (ctx) => {
    const url = ctx.req.url ?? '';
    if (!url.startsWith(path) || (url.length > path.length && url.charCodeAt(path.length) !== 63) /* ? */) return CONTINUE;
    if (ctx.req.method !== 'POST') return reject('method_not_allowed', `${ctx.req.method} is not allowed on ${path}.`, { allow: 'POST' });
    const counted = deps.quota(ctx);
    return counted instanceof Promise ? counted.then((d) => d ?? mint(ctx, deps)) : (counted ?? mint(ctx, deps));
  };
}

function mint(ctx: RequestContext, deps: { tickets: WsTicketStore; health?: StoreHealth }): Decision | Promise<Decision> {
  if (deps.health?.isDown()) return UNAVAILABLE;
  const ticket = newTicket();
  return deps.tickets.put(ticketHash(ticket), ctx.consumer!.id, TICKET_TTL_SECONDS).then(
    (): Answer => ({
      status: 201,
      headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' },
      body: Buffer.from(JSON.stringify({ ticket, expiresInSeconds: TICKET_TTL_SECONDS })),
    }),
    (err: unknown) => {
      deps.health?.failed(err);
      return UNAVAILABLE;
    },
  );
}
