import { describe, expect, it } from 'vitest';
import { isTicket, newTicket, ticketHash } from '../../src/keys/ws-ticket.js';
import { MemoryWsTicketStore } from '../../src/store/memory/memory-ws-ticket-store.js';

describe('WebSocket tickets on the embedded store', () => {
  it('a ticket is taken once, by its hash', async () => {
    const store = new MemoryWsTicketStore();
    const ticket = newTicket();
    expect(isTicket(ticket)).toBe(true);
    await store.put(ticketHash(ticket), 'abcdefghijkl', 30);
    const [first, second] = await Promise.all([store.take(ticketHash(ticket)), store.take(ticketHash(ticket))]);
    expect([first, second]).toEqual(['abcdefghijkl', null]);
    expect(await store.take(ticketHash(newTicket()))).toBeNull();
  });

  it('a ticket past its time is gone', async () => {
    const store = new MemoryWsTicketStore();
    await store.put('h', 'abcdefghijkl', 0.001);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await store.take('h')).toBeNull();
  });
});
