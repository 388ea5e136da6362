import { connect, createServer, type Socket } from 'node:net';

/**
 * A TCP proxy that holds every chunk `delayMs` in each direction before passing it on, in order:
 * a Redis `delayMs` away each way, for tests of what a round trip costs (never a timing of ours).
 */
export async function delayProxy(targetPort: number, delayMs: number): Promise<{ url: string; close: () => void }> {
  const sockets: Socket[] = [];
  const server = createServer((client) => {
    const upstream = connect(targetPort, '127.0.0.1');
    sockets.push(client, upstream);
    // Timers of one duration fire in the order they were set: chunks keep their order.
    client.on('data', (chunk) => setTimeout(() => upstream.write(chunk), delayMs));
    upstream.on('data', (chunk) => setTimeout(() => client.write(chunk), delayMs));
    for (const socket of [client, upstream]) socket.on('error', () => {});
    client.on('close', () => setTimeout(() => upstream.destroy(), delayMs));
    upstream.on('close', () => setTimeout(() => client.destroy(), delayMs));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `redis://127.0.0.1:${(server.address() as { port: number }).port}`,
    close: () => {
      server.close();
      for (const socket of sockets) socket.destroy();
    },
  };
}
