import type { IncomingMessage } from 'node:http';
import { TICKET_SUBPROTOCOL_PREFIX } from '../keys/ws-ticket.js';

export interface HandshakeTicket {
  /** The ticket as sent; `undefined` when the handshake carried more than one (refused). */
  ticket: string | undefined;
  /** The `Sec-WebSocket-Protocol` entry it came in, to be answered if the upstream picks no other. */
  subprotocol?: string;
}

/**
 * Takes a WebSocket ticket out of a handshake: the `ticket` query parameter or a
 * `Sec-WebSocket-Protocol` entry `tollgate.ticket.<ticket>`. Either way it is removed from the
 * request before anything else reads it, so neither the upstream nor any log line sees it; the
 * other parameters and subprotocols stay as sent. Undefined when the handshake carries none.
 */
export function takeTicketFromHandshake(req: IncomingMessage): HandshakeTicket | undefined {
  const found: string[] = [];
  let subprotocol: string | undefined;
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  if (q !== -1) {
    const kept: string[] = [];
    for (const pair of url.slice(q + 1).split('&')) {
      const eq = pair.indexOf('=');
      const name = eq === -1 ? pair : pair.slice(0, eq);
      if (name === 'ticket') found.push(eq === -1 ? '' : decodeParameter(pair.slice(eq + 1)));
      else kept.push(pair);
    }
    if (found.length > 0) req.url = url.slice(0, q) + (kept.length > 0 ? `?${kept.join('&')}` : '');
  }
  const protocols = req.headers['sec-websocket-protocol'];
  if (typeof protocols === 'string' && protocols.includes(TICKET_SUBPROTOCOL_PREFIX)) {
    const kept: string[] = [];
    for (const entry of protocols.split(',').map((p) => p.trim())) {
      if (entry.startsWith(TICKET_SUBPROTOCOL_PREFIX)) {
        found.push(entry.slice(TICKET_SUBPROTOCOL_PREFIX.length));
        subprotocol = entry;
      } else if (entry !== '') kept.push(entry);
    }
    if (kept.length > 0) req.headers['sec-websocket-protocol'] = kept.join(', ');
    else delete req.headers['sec-websocket-protocol'];
  }
  if (found.length === 0) return undefined;
  return { ticket: found.length === 1 ? found[0] : undefined, subprotocol };
}

function decodeParameter(value: string): string {
  try {
    return decodeURIComponent(value.replace(/\+/g, ' '));
  } catch {
    return '';
  }
}
