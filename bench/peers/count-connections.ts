// Preloaded into an upstream (`--import tsx --import ./count-connections.ts`): counts the TCP
// connections its servers accept, so the benchmark can say how many upstream connections each
// proxy opened in a round (one per request when a pool fails to reuse them). It subscribes to
// Node's `net.server.socket` diagnostics channel, published where a server emits 'connection',
// so the upstream itself stays unchanged. It counts the requests they receive the same way
// (`http.server.request.start`), so the benchmark can say how many requests a caching proxy let
// through. The counts are served as `{"accepted":N,"requests":M}` on
// 127.0.0.1:$BENCH_CONNECTIONS_PORT, whose own connections and requests are not counted.
import { channel } from 'node:diagnostics_channel';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { Socket } from 'node:net';

const port = Number(process.env.BENCH_CONNECTIONS_PORT);
if (!Number.isInteger(port) || port <= 0) throw new Error('count-connections: BENCH_CONNECTIONS_PORT is not set');

let accepted = 0;
let requests = 0;
channel('net.server.socket').subscribe((message) => {
  if ((message as { socket: Socket }).socket.localPort !== port) accepted++;
});
channel('http.server.request.start').subscribe((message) => {
  if ((message as { server: Server }).server !== control) requests++;
});

const control = createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ accepted, requests }));
});
control.listen(port, '127.0.0.1');
control.unref();
