import type { PlansConfig } from '../../config/plans-schema.js';
import { newTicket, ticketHash, TICKET_TTL_SECONDS, type TicketGrant } from '../../keys/ws-ticket.js';
import { quotaFor } from '../../quota/quota-for.js';
import { quotaSubject } from '../../quota/quota-subject.js';
import { rateLimitHeaders } from '../../quota/rate-limit-headers.js';
import type { QuotaStore } from '../../store/quota-store.js';
import type { StoreHealth } from '../../store/store-health.js';
import type { WsTicketStore } from '../../store/ws-ticket-store.js';
import { invalidToken } from './authenticate.js';
import { CONTINUE, reject, type Answer, type Decision, type Policy, type RequestContext } from '../context.js';

const UNAVAILABLE = reject('key_store_unavailable', undefined, { 'retry-after': 1 });

/**
 * POST `path` (e.g. /v1/ws-tickets) with a key or a JWT: a WebSocket ticket for that consumer,
 * answered by the gateway (src/keys/ws-ticket.ts). A JWT's ticket lasts no longer than the token,
 * and a token with less than a second left gets none (401 invalid_token, before any counting).
 * Minting is counted like any request of the consumer, by `quota` (enforce-quota.ts) run here,
 * before the ticket exists: a consumer over its quota or banned gets no ticket. The handshake that uses it is counted again, as any handshake. It is placed before
 * route-to-service.ts: the path belongs to the gateway, not to a service a plan might leave out.
 * An empty `path` turns it off.
 */
export interface WsTicketDeps {
  tickets: WsTicketStore;
  /** enforce-quota.ts: counts the minting request. */
  quota: Policy;
  /** For a 405's rate-limit headers, read without consuming (as serve-usage.ts). */
  quotas: QuotaStore;
  plans: () => PlansConfig;
  health?: StoreHealth;
}

export function serveWsTickets(path: string, deps: WsTicketDeps): Policy {
  if (path === '') return () => CONTINUE;
  return (ctx) => {
    const url = ctx.req.url ?? '';
    if (!url.startsWith(path) || (url.length > path.length && url.charCodeAt(path.length) !== 63) /* ? */) return CONTINUE;
    if (ctx.req.method !== 'POST') return notAllowed(ctx, path, deps);
    // A ticket stands for a credential: an anonymous caller has none to lend a WebSocket.
    if (ctx.consumer?.anonymous) return reject('missing_api_key', undefined, { 'www-authenticate': 'Bearer realm="tollgate"' });
    if (ticketSeconds(ctx) < 1) return invalidToken('The token expires within a second; refresh it before asking for a ticket.');
    const counted = deps.quota(ctx);
    return counted instanceof Promise ? counted.then((d) => d ?? mint(ctx, deps)) : (counted ?? mint(ctx, deps));
  };
}

function mint(ctx: RequestContext, deps: { tickets: WsTicketStore; health?: StoreHealth }): Decision | Promise<Decision> {
  const consumer = ctx.consumer!;
  const credential = ctx.credential;
  const grant: TicketGrant =
    credential?.kind === 'token'
      ? {
          consumer: { id: consumer.id, plan: consumer.plan, ...(consumer.scopes && { scopes: [...consumer.scopes] }) },
          validUntilMs: credential.validUntilMs,
        }
      : { keyId: consumer.id };
  // Whole seconds for Redis' EX; a token that ran out while the mint was counted is refused at the handshake.
  const ttlSeconds = Math.max(1, ticketSeconds(ctx));
  if (deps.health?.isDown()) return UNAVAILABLE;
  const ticket = newTicket();
  return deps.tickets.put(ticketHash(ticket), grant, ttlSeconds).then(
    (): Answer => ({
      status: 201,
      headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' },
      body: Buffer.from(JSON.stringify({ ticket, expiresInSeconds: ttlSeconds })),
    }),
    (err: unknown) => {
      deps.health?.failed(err);
      return UNAVAILABLE;
    },
  );
}

/** How long a ticket minted now may live: TICKET_TTL_SECONDS, cut to what is left of a JWT (a ticket never outlives its token). */
function ticketSeconds(ctx: RequestContext): number {
  const credential = ctx.credential;
  if (credential?.kind !== 'token') return TICKET_TTL_SECONDS;
  return Math.min(TICKET_TTL_SECONDS, Math.floor((credential.validUntilMs - Date.now()) / 1000));
}

/** Like every answer to an identified caller, a 405 carries the rate-limit headers; it consumes nothing. */
function notAllowed(ctx: RequestContext, path: string, deps: WsTicketDeps): Decision | Promise<Decision> {
  const refusal = (headers: Record<string, string | number> = {}) =>
    reject('method_not_allowed', `${ctx.req.method} is not allowed on ${path}.`, { allow: 'POST', ...headers });
  const record = ctx.consumer!;
  const quota = quotaFor(record, deps.plans());
  if (!quota) return reject('plan_not_configured');
  if (deps.health?.isDown()) return UNAVAILABLE;
  return deps.quotas.usage(quotaSubject(record, quota), quota).then(
    (outcome) => refusal(rateLimitHeaders(quota, outcome)),
    (err: unknown) => {
      deps.health?.failed(err);
      return UNAVAILABLE;
    },
  );
}
