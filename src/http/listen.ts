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
    // Connections busy when the close began become idle as their responses end; close those too.
    const sweep = setInterval(() => server.closeIdleConnections(), 50);
    const timer = setTimeout(() => {
      server.closeAllConnections();
      finish();
    }, graceMs);
    function finish() {
      clearInterval(sweep);
      clearTimeout(timer);
      resolve();
    }
    server.close(finish);
    server.closeIdleConnections();
  });
}
