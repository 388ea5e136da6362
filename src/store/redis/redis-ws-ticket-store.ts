import type { WsTicketStore } from '../ws-ticket-store.js';
import type { RedisClient } from './connect.js';
import { wsTicketKey } from './redis-keys.js';

/** Tickets in Redis: SET with an expiry, taken with GETDEL (Redis ≥ 6.2), one atomic step. */
export class RedisWsTicketStore implements WsTicketStore {
  constructor(private readonly redis: RedisClient) {}

  async put(ticketHash: string, keyId: string, ttlSeconds: number): Promise<void> {
    await this.redis.set(wsTicketKey(ticketHash), keyId, 'EX', ttlSeconds);
  }

  take(ticketHash: string): Promise<string | null> {
    return this.redis.getdel(wsTicketKey(ticketHash));
  }
}
