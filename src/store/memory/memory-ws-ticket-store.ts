import { LRUCache } from 'lru-cache';
import type { WsTicketStore } from '../ws-ticket-store.js';

/** The embedded store's tickets: bounded (the oldest go first under a flood), expiring on their own. */
export class MemoryWsTicketStore implements WsTicketStore {
  private readonly tickets = new LRUCache<string, string>({ max: 100_000, ttlAutopurge: false });

  put(ticketHash: string, keyId: string, ttlSeconds: number): Promise<void> {
    this.tickets.set(ticketHash, keyId, { ttl: ttlSeconds * 1000 });
    return Promise.resolve();
  }

  take(ticketHash: string): Promise<string | null> {
    const keyId = this.tickets.get(ticketHash);
    this.tickets.delete(ticketHash);
    return Promise.resolve(keyId ?? null);
  }
}
