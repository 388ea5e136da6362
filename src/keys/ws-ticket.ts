import { hash, randomBytes } from 'node:crypto';

// WebSocket tickets: a browser cannot send Authorization on a WebSocket, and a long-lived API key
// in a URL ends up in every log on the way. A ticket is what goes in the handshake instead:
// `tgws_` and 32 random bytes (base64url), minted for one key by POST /v1/ws-tickets, good for
// TICKET_TTL_SECONDS and one handshake. Only its SHA-256 is stored (src/store/ws-ticket-store.ts).

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
