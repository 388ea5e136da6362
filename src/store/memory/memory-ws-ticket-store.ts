import { LRUCache } from 'lru-cache';
import type { TicketGrant } from '../../keys/ws-ticket.js';
import type { WsTicketStore } from '../ws-ticket-store.js';

/** The embedded store's tickets: bounded (the oldest go first under a flood), expiring on their own. */
export class MemoryWsTicketStore implements WsTicketStore {
  private readonly tickets = new LRUCache<string, TicketGrant>({ max: 100_000, ttlAutopurge: false });

  put(ticketHash: string, grant: TicketGrant, ttlSeconds: number): Promise<void> {
    this.tickets.set(ticketHash, grant, { ttl: ttlSeconds * 1000 });
    return Promise.resolve();
  }

  take(ticketHash: string): Promise<TicketGrant | null> {
    const grant = this.tickets.get(ticketHash);
    this.tickets.delete(ticketHash);
    return Promise.resolve(grant ?? null);
  }
}
