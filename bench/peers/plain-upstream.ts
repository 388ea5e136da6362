// The upstream most of our users run behind a Node gateway: a plain Node `http.createServer` with
// every default (so it announces `Keep-Alive: timeout=5`), answering a small JSON body. The
// benchmark runs every target in front of it as well as in front of the bundled backend
// (issue 21). Nothing here counts or checks anything: ./count-connections.ts, preloaded, counts
// the connections it accepts. Run as its own process:
//   node --import tsx bench/peers/plain-upstream.ts
// Prints one JSON line `{"msg":"plain upstream listening","url":…}` on stdout. With
// BENCH_CACHE_CONTROL set, every answer carries it as `Cache-Control` (the `tollgate-cache`
// target's upstream: bench/cache-target.ts); without it, none, as Node's defaults.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

const body = JSON.stringify({
  categories: [
    { id: 'books', name: 'Books' },
    { id: 'music', name: 'Music' },
  ],
  total: 2,
});
const cacheControl = process.env.BENCH_CACHE_CONTROL;
const headers = cacheControl
  ? { 'content-type': 'application/json', 'cache-control': cacheControl }
  : { 'content-type': 'application/json' };
const server = createServer((_req, res) => {
  res.writeHead(200, headers);
  res.end(body);
});
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ msg: 'plain upstream listening', url: `http://127.0.0.1:${port}` })}\n`);
});
