import type { TicketGrant } from '../keys/ws-ticket.js';

/**
 * Where WebSocket tickets wait for their one handshake (src/keys/ws-ticket.ts): Redis when
 * configured, so a ticket minted on one replica opens a WebSocket on any other; memory on the
 * embedded store (one process). Entries are keyed by the ticket's hash and expire on their own.
 */
export interface WsTicketStore {
  /** Holds `grant` under `ticketHash` for `ttlSeconds`. */
  put(ticketHash: string, grant: TicketGrant, ttlSeconds: number): Promise<void>;
  /** The grant, removed in the same step (one use, even with two handshakes racing); null when unknown, expired or used. */
  take(ticketHash: string): Promise<TicketGrant | null>;
}
