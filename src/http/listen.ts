import type { Server } from 'node:http';
import type { Http2SecureServer } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { Server as TlsServer } from 'node:tls';
import { closeTlsConnections } from './tls-listener.js';

/** A plain HTTP/1.1 server, or the TLS listener of HTTP/1.1 and HTTP/2 (tls-listener.ts). */
export type Listener = Server | Http2SecureServer;

/** Listens and resolves with the base URL actually bound (port 0 picks a free port); https for a TLS listener. */
export function listen(server: Listener, host: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      const address = server.address() as AddressInfo;
      const shownHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
      resolve(`${server instanceof TlsServer ? 'https' : 'http'}://${shownHost}:${address.port}`);
    });
  });
}

/**
 * Stops accepting connections and resolves once in-flight requests are done, or when `graceMs`
 * runs out (then the remaining connections are cut). Idle keep-alive sockets are closed at once;
 * HTTP/2 sessions get GOAWAY at once, and end when their open streams have.
 */
export function closeGracefully(server: Listener, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    // Connections busy when the close began become idle as their responses end; close those too.
    // (The TLS listener has it for its HTTP/1.1 connections: Node's http2 server with allowHTTP1.)
    const closeIdle = () => (server as Server).closeIdleConnections();
    const sweep = setInterval(closeIdle, 50);
    const timer = setTimeout(() => {
      if (!closeTlsConnections(server, true)) (server as Server).closeAllConnections();
      finish();
    }, graceMs);
    function finish() {
      clearInterval(sweep);
      clearTimeout(timer);
      resolve();
    }
    server.close(finish);
    closeIdle();
    closeTlsConnections(server, false);
  });
}
