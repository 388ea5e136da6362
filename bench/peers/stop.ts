import type { Server } from 'node:http';

/** On SIGTERM or SIGINT: close the server and its connections, release the rest, exit 0. */
export function onStopSignal(server: Server, release: () => void | Promise<void>): void {
  const stop = () => {
    server.close(() => void Promise.resolve(release()).finally(() => process.exit(0)));
    server.closeAllConnections();
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}
