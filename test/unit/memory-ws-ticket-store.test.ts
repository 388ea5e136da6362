import { describe, expect, it } from 'vitest';
import { decodeGrant, encodeGrant, isTicket, newTicket, ticketHash, type TicketGrant } from '../../src/keys/ws-ticket.js';
import { MemoryWsTicketStore } from '../../src/store/memory/memory-ws-ticket-store.js';

describe('WebSocket tickets on the embedded store', () => {
  it('a ticket is taken once, by its hash', async () => {
    const store = new MemoryWsTicketStore();
    const ticket = newTicket();
    expect(isTicket(ticket)).toBe(true);
    await store.put(ticketHash(ticket), { keyId: 'abcdefghijkl' }, 30);
    const [first, second] = await Promise.all([store.take(ticketHash(ticket)), store.take(ticketHash(ticket))]);
    expect([first, second]).toEqual([{ keyId: 'abcdefghijkl' }, null]);
    expect(await store.take(ticketHash(newTicket()))).toBeNull();
  });

  it('a ticket past its time is gone', async () => {
    const store = new MemoryWsTicketStore();
    await store.put('h', { keyId: 'abcdefghijkl' }, 0.001);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await store.take('h')).toBeNull();
  });
});

describe('what a ticket stands for, as Redis holds it', () => {
  it('a key as its id (as replicas before JWT tickets wrote it), a JWT consumer as its id, plan and end', () => {
    const key: TicketGrant = { keyId: 'abcdefghijkl' };
    const jwt: TicketGrant = { consumer: { id: 'jwt:idp:user-1', plan: 'pro' }, validUntilMs: 1_800_000_000_000 };
    expect(encodeGrant(key)).toBe('abcdefghijkl');
    expect(decodeGrant(encodeGrant(key))).toEqual(key);
    expect(decodeGrant(encodeGrant(jwt))).toEqual(jwt);
  });

  it('anything else is no grant', () => {
    for (const value of ['{', '{}', '{"id":"jwt:a:b","plan":"pro"}', '{"id":1,"plan":"pro","until":1}']) {
      expect(decodeGrant(value)).toBeNull();
    }
  });
});
