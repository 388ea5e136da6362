// A reference beside bare http-proxy-3: the plain forwarder a user would write on undici (the
// library tollgate forwards on, src/gateway/proxy.ts), no policy, no logging: a node:http server
// in front, undici's keep-alive pool behind, `pool.request` and a pipe. It shows how much of
// tollgate's speed is the library and how much the way it is used (one dispatch handler per
// exchange, no body stream object, no pipe).
// Run as its own process by the benchmark:
//   node --import tsx bench/peers/bare-undici.ts <upstream-url> <key-id> <plan>
// Prints one JSON line `{"msg":"bare undici listening","url":…}` on stdout.
import { createServer, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeline } from 'node:stream';
import { Pool } from 'undici';
import { identify, keepAssertionFresh } from './identity.js';
import { onStopSignal } from './stop.js';

const [upstream, keyId, plan] = process.argv.slice(2);
if (!upstream || !keyId || !plan) {
  process.stderr.write('usage: node --import tsx bench/peers/bare-undici.ts <upstream-url> <key-id> <plan>\n');
  process.exit(2);
}
const assertion = await keepAssertionFresh(keyId, plan);
const pool = new Pool(upstream, { connections: 512, pipelining: 1 });
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'proxy-connection', 'expect']);

const server = createServer(
  { headersTimeout: 10_000, requestTimeout: 60_000, keepAliveTimeout: 65_000, maxHeaderSize: 16 * 1024 },
  (req, res) => {
    const headers: IncomingHttpHeaders = {};
    for (const name in req.headers) if (!HOP_BY_HOP.has(name)) headers[name] = req.headers[name];
    identify(headers, keyId, plan, assertion());
    const body = req.method === 'GET' || req.method === 'HEAD' ? null : req;
    pool.request({ method: req.method as 'GET', path: req.url ?? '/', headers, body }).then(
      (answer) => {
        const out: OutgoingHttpHeaders = {};
        for (const name in answer.headers) if (!HOP_BY_HOP.has(name)) out[name] = answer.headers[name];
        res.writeHead(answer.statusCode, out);
        pipeline(answer.body, res, () => undefined);
      },
      () => {
        if (res.headersSent) return void res.destroy();
        res.statusCode = 502;
        res.end();
      },
    );
  },
);

server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ msg: 'bare undici listening', url: `http://127.0.0.1:${port}` })}\n`);
});
onStopSignal(server, () => void pool.destroy());
