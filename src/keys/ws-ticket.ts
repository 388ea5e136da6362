import { hash, randomBytes } from 'node:crypto';

// WebSocket tickets: a browser cannot send Authorization on a WebSocket, and a long-lived API key
// in a URL ends up in every log on the way. A ticket is what goes in the handshake instead:
// `tgws_` and 32 random bytes (base64url), minted for one key or JWT consumer by POST /v1/ws-tickets,
// good for TICKET_TTL_SECONDS (less when the JWT expires sooner) and one handshake. Only its
// SHA-256 is stored (src/store/ws-ticket-store.ts).

export const TICKET_PREFIX = 'tgws_';
export const TICKET_TTL_SECONDS = 30;
const TICKET_PATTERN = /^tgws_[A-Za-z0-9_-]{43}$/;
/** The `Sec-WebSocket-Protocol` entry that carries a ticket: `tollgate.ticket.<ticket>`. */
export const TICKET_SUBPROTOCOL_PREFIX = 'tollgate.ticket.';

export function newTicket(): string {
  return TICKET_PREFIX + randomBytes(32).toString('base64url');
}

/** The ticket is well formed: anything else is refused without a store round trip. */
export function isTicket(value: string): boolean {
  return TICKET_PATTERN.test(value);
}

/** What the store holds instead of the ticket (a dump of the store hands out nothing usable). */
export function ticketHash(ticket: string): string {
  return hash('sha256', ticket, 'base64url');
}

/**
 * What a ticket stands for, enough to rebuild the consumer at the handshake. An API key: its id,
 * looked up again then, so a revocation, an expiry or a plan change since the ticket still applies.
 * A JWT's consumer: its id, plan and scopes, and when the token stops being valid (exp plus the
 * issuer's clock skew); never the token itself, which the gateway does not keep.
 */
export type TicketGrant = { keyId: string } | { consumer: { id: string; plan: string; scopes?: string[] }; validUntilMs: number };

/**
 * A grant as the store holds it: a key's id as it is (a key id never starts with `{`: ids live
 * inside Redis hash tags), a JWT's consumer as JSON.
 */
export function encodeGrant(grant: TicketGrant): string {
  if ('keyId' in grant) return grant.keyId;
  const { id, plan, scopes } = grant.consumer;
  return JSON.stringify({ id, plan, until: grant.validUntilMs, ...(scopes && { scopes }) });
}

/** The grant of a stored value; null for anything this gateway did not write. */
export function decodeGrant(value: string): TicketGrant | null {
  if (!value.startsWith('{')) return { keyId: value };
  try {
    const held = JSON.parse(value) as { id?: unknown; plan?: unknown; until?: unknown; scopes?: unknown };
    if (typeof held.id !== 'string' || typeof held.plan !== 'string' || typeof held.until !== 'number') return null;
    const scopes = Array.isArray(held.scopes) && held.scopes.every((s) => typeof s === 'string') ? held.scopes : undefined;
    return { consumer: { id: held.id, plan: held.plan, ...(scopes && { scopes }) }, validUntilMs: held.until };
  } catch {
    return null;
  }
}
