import type { Server as NetServer, Socket } from 'node:net';
import { Counter, Gauge, type Registry } from 'prom-client';
import { rawErrorResponse } from '../errors/render.js';

export interface ConnectionGuardOptions {
  /** A connection must complete its first request head this long after it was accepted. */
  headersTimeoutMs: number;
  /** Open connections one peer address may hold; 0: no cap. */
  maxConnectionsPerAddress: number;
}

/**
 * Connections that never speak, and peers that open too many.
 *
 * Node's `headersTimeout` starts at a request's first byte, so a connection that sends nothing
 * (or only half a TLS handshake) is never timed out: measured, 12,000 silent connections stayed
 * open indefinitely, and one client could use up the process's file descriptors. Here, as with
 * nginx's `client_header_timeout`, the clock starts when the TCP connection is accepted: a
 * connection whose first request head is not complete `headersTimeoutMs` later is closed. On TLS
 * the guard sits on the raw TCP socket (the server's 'connection' event comes before the
 * handshake), so a handshake that never completes is covered too. Once a head has arrived the
 * guard lets go: Node's own timeouts take over (headersTimeout and requestTimeout for each
 * request, keepAliveTimeout between requests).
 *
 * `maxConnectionsPerAddress` caps what one peer address holds open; over it a new connection is
 * closed at once, without reading a byte. It counts the TCP peer: behind a load balancer every
 * client shares its address, so leave it 0 there.
 *
 * Any net.Server fits (http, https, http2): call `spoke(socket)` with the socket a request head
 * arrived on, the raw one or a TLS socket over it.
 */
export class ConnectionGuard {
  private readonly perAddress = new Map<string, number>();
  /** Raw sockets still waiting for their first request head, with their deadline timer. */
  private readonly silent = new Map<Socket, NodeJS.Timeout>();
  private readonly closed: Counter<'reason'>;
  readonly open: Gauge;

  constructor(
    private readonly options: ConnectionGuardOptions,
    registry: Registry,
  ) {
    this.closed = new Counter({
      name: 'tollgate_connections_closed_by_guard_total',
      help: 'Client connections the gateway closed: no request head in time (silent), or over the per-address cap (per_address)',
      labelNames: ['reason'],
      registers: [registry],
    });
    this.open = new Gauge({ name: 'tollgate_client_connections', help: 'Client connections open now', registers: [registry] });
  }

  /**
   * Guards every connection `server` accepts from now on. `plain`: the server reads HTTP/1.1 off
   * the accepted socket itself (not TLS), so a half-sent head can still be answered 408.
   */
  attach(server: NetServer, protocol: 'plain' | 'tls'): void {
    server.on('connection', (socket: Socket) => this.accepted(socket, protocol === 'plain'));
  }

  private accepted(socket: Socket, plain: boolean): void {
    const address = socket.remoteAddress ?? '';
    const held = (this.perAddress.get(address) ?? 0) + 1;
    const cap = this.options.maxConnectionsPerAddress;
    if (cap > 0 && held > cap) {
      this.closed.inc({ reason: 'per_address' });
      socket.destroy();
      return;
    }
    this.perAddress.set(address, held);
    this.open.inc();
    const timer = setTimeout(() => this.timedOut(socket, plain), this.options.headersTimeoutMs);
    timer.unref();
    this.silent.set(socket, timer);
    socket.once('close', () => {
      this.letGo(socket);
      this.open.dec();
      const left = (this.perAddress.get(address) ?? 1) - 1;
      if (left > 0) this.perAddress.set(address, left);
      else this.perAddress.delete(address);
    });
  }

  /** A request head arrived on `socket` (or on the TLS socket over it): its connection spoke. */
  spoke(socket: Socket): void {
    this.letGo(socket);
    // A TLSSocket wraps the raw socket the server accepted (Node keeps it as `_parent`).
    const raw = (socket as { _parent?: Socket })._parent;
    if (raw) this.letGo(raw);
  }

  private letGo(socket: Socket): void {
    const timer = this.silent.get(socket);
    if (timer === undefined) return;
    clearTimeout(timer);
    this.silent.delete(socket);
  }

  private timedOut(socket: Socket, plain: boolean): void {
    this.silent.delete(socket);
    this.closed.inc({ reason: 'silent' });
    // Part of a plain HTTP/1.1 head arrived: answer 408 as Node's own header timeout would
    // (client-errors.ts). Nothing arrived, or a TLS handshake stalled: nobody to answer, just close.
    if (plain && socket.bytesRead > 0 && socket.writable) {
      socket.end(rawErrorResponse('request_timeout'));
      setTimeout(() => socket.destroy(), 1000).unref();
      return;
    }
    socket.destroy();
  }
}
