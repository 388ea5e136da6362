// Preloaded into an upstream (`--import tsx --import ./count-connections.ts`): counts the TCP
// connections its servers accept, so the benchmark can say how many upstream connections each
// proxy opened in a round (one per request when a pool fails to reuse them). It subscribes to
// Node's `net.server.socket` diagnostics channel, published where a server emits 'connection',
// so the upstream itself stays unchanged. The count is served as `{"accepted":N}` on
// 127.0.0.1:$BENCH_CONNECTIONS_PORT, whose own connections are not counted.
import { channel } from 'node:diagnostics_channel';
import { createServer } from 'node:http';
import type { Socket } from 'node:net';

const port = Number(process.env.BENCH_CONNECTIONS_PORT);
if (!Number.isInteger(port) || port <= 0) throw new Error('count-connections: BENCH_CONNECTIONS_PORT is not set');

let accepted = 0;
channel('net.server.socket').subscribe((message) => {
  if ((message as { socket: Socket }).socket.localPort !== port) accepted++;
});

const control = createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ accepted }));
});
control.listen(port, '127.0.0.1');
control.unref();
