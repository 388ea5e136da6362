import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { takeTicketFromHandshake } from '../../src/gateway/ws-ticket-in-handshake.js';

const handshake = (url: string, protocols?: string) =>
  ({ url, headers: protocols === undefined ? {} : { 'sec-websocket-protocol': protocols } }) as unknown as IncomingMessage;

describe('a ticket taken out of a WebSocket handshake', () => {
  it('from the query, other parameters kept in order', () => {
    const req = handshake('/v1/live?room=7&ticket=tgws_abc&x=1');
    expect(takeTicketFromHandshake(req)).toEqual({ ticket: 'tgws_abc', subprotocol: undefined });
    expect(req.url).toBe('/v1/live?room=7&x=1');
    const only = handshake('/v1/live?ticket=tgws_abc');
    takeTicketFromHandshake(only);
    expect(only.url).toBe('/v1/live');
  });

  it('from Sec-WebSocket-Protocol, the other entries kept', () => {
    const req = handshake('/v1/live', 'chat, tollgate.ticket.tgws_abc');
    expect(takeTicketFromHandshake(req)).toEqual({ ticket: 'tgws_abc', subprotocol: 'tollgate.ticket.tgws_abc' });
    expect(req.headers['sec-websocket-protocol']).toBe('chat');
    const alone = handshake('/v1/live', 'tollgate.ticket.tgws_abc');
    takeTicketFromHandshake(alone);
    expect(alone.headers['sec-websocket-protocol']).toBeUndefined();
  });

  it('two tickets: none is chosen (refused), and both are still removed', () => {
    const req = handshake('/v1/live?ticket=a&ticket=b', 'tollgate.ticket.c');
    expect(takeTicketFromHandshake(req)!.ticket).toBeUndefined();
    expect(req.url).toBe('/v1/live');
    expect(req.headers['sec-websocket-protocol']).toBeUndefined();
  });

  it('none: undefined, nothing changed', () => {
    const req = handshake('/v1/live?tickets=1', 'chat');
    expect(takeTicketFromHandshake(req)).toBeUndefined();
    expect(req.url).toBe('/v1/live?tickets=1');
  });
});
