// An OTLP/HTTP receiver that accepts every export request and discards it: what the gateway's
// tracing targets of the benchmark (tollgate-trace-1, tollgate-trace-100) export to, on loopback,
// so the run measures what tracing costs the gateway, not what a collector does. Run as its own
// process:
//   node --import tsx bench/peers/otlp-sink.ts
// Prints one JSON line `{"msg":"otlp sink listening","url":…}` on stdout, and on SIGTERM one line
// with the export requests and bytes it took.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

let requests = 0;
let bytes = 0;
const server = createServer((req, res) => {
  req.on('data', (chunk: Buffer) => (bytes += chunk.length));
  req.on('end', () => {
    requests++;
    const json = String(req.headers['content-type']).includes('json');
    res.writeHead(200, { 'content-type': json ? 'application/json' : 'application/x-protobuf' });
    res.end(json ? '{}' : undefined);
  });
});
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ msg: 'otlp sink listening', url: `http://127.0.0.1:${port}` })}\n`);
});
process.on('SIGTERM', () => {
  process.stdout.write(`${JSON.stringify({ msg: 'otlp sink done', requests, bytes })}\n`);
  process.exit(0);
});
