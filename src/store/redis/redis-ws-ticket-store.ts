import { decodeGrant, encodeGrant, type TicketGrant } from '../../keys/ws-ticket.js';
import type { WsTicketStore } from '../ws-ticket-store.js';
import type { RedisClient } from './connect.js';
import { wsTicketKey } from './redis-keys.js';

/** Tickets in Redis: SET with an expiry, taken with GETDEL (Redis ≥ 6.2), one atomic step. */
export class RedisWsTicketStore implements WsTicketStore {
  constructor(private readonly redis: RedisClient) {}

  async put(ticketHash: string, grant: TicketGrant, ttlSeconds: number): Promise<void> {
    await this.redis.set(wsTicketKey(ticketHash), encodeGrant(grant), 'EX', ttlSeconds);
  }

  async take(ticketHash: string): Promise<TicketGrant | null> {
    const value = await this.redis.getdel(wsTicketKey(ticketHash));
    return value === null ? null : decodeGrant(value);
  }
}
