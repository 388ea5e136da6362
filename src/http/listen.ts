import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Listens and resolves with the base URL actually bound (port 0 picks a free port). */
export function listen(server: Server, host: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      const address = server.address() as AddressInfo;
      const shownHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
      resolve(`http://${shownHost}:${address.port}`);
    });
  });
}

/**
 * Stops accepting connections and resolves once in-flight requests are done, or when `graceMs`
 * runs out (then the remaining connections are cut). Idle keep-alive sockets are closed at once.
 */
export function closeGracefully(server: Server, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      server.closeAllConnections();
      resolve();
    }, graceMs);
    timer.unref();
    server.close(() => {
      clearTimeout(timer);
      resolve();
    });
    server.closeIdleConnections();
  });
}
