// The upstream most of our users run behind a Node gateway: a plain Node `http.createServer` with
// every default (so it announces `Keep-Alive: timeout=5`), answering a small JSON body. The
// benchmark runs every target in front of it as well as in front of the bundled backend
// (issue 21). Nothing here counts or checks anything: ./count-connections.ts, preloaded, counts
// the connections it accepts. Run as its own process:
//   node --import tsx bench/peers/plain-upstream.ts
// Prints one JSON line `{"msg":"plain upstream listening","url":…}` on stdout.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

const body = JSON.stringify({
  categories: [
    { id: 'books', name: 'Books' },
    { id: 'music', name: 'Music' },
  ],
  total: 2,
});
const server = createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(body);
});
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ msg: 'plain upstream listening', url: `http://127.0.0.1:${port}` })}\n`);
});
