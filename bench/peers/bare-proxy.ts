// The ceiling (issue 14): a bare http-proxy-3 with a keep-alive agent, no policy, no logging: the
// plain Node proxy a user would write. tollgate forwards on undici's pool (src/gateway/proxy.ts;
// ./bare-undici.ts is that library used the plain way); the server options here are the ones it uses.
// Run as its own process by the benchmark:
//   node --import tsx bench/peers/bare-proxy.ts <upstream-url> <key-id> <plan>
// Prints one JSON line `{"msg":"bare proxy listening","url":…}` on stdout.
//
// The bundled backend answers only requests carrying a valid gateway assertion, so this proxy adds
// one for the benchmark's key (./identity.ts), so the backend does the same work behind every proxy.
import { Agent, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createProxyServer } from 'http-proxy-3';
import { identify, keepAssertionFresh } from './identity.js';
import { onStopSignal } from './stop.js';

const [upstream, keyId, plan] = process.argv.slice(2);
if (!upstream || !keyId || !plan) {
  process.stderr.write('usage: node --import tsx bench/peers/bare-proxy.ts <upstream-url> <key-id> <plan>\n');
  process.exit(2);
}
const assertion = await keepAssertionFresh(keyId, plan);

const agent = new Agent({ keepAlive: true, maxSockets: 512, maxFreeSockets: 256, timeout: 60_000, scheduling: 'lifo' });
const proxy = createProxyServer({ target: upstream, agent, xfwd: true });

const server = createServer(
  { headersTimeout: 10_000, requestTimeout: 60_000, keepAliveTimeout: 65_000, maxHeaderSize: 16 * 1024 },
  (req, res) => {
    identify(req.headers, keyId, plan, assertion());
    proxy.web(req, res, {}, () => {
      if (res.headersSent) return void res.destroy();
      res.statusCode = 502;
      res.end();
    });
  },
);

server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ msg: 'bare proxy listening', url: `http://127.0.0.1:${port}` })}\n`);
});
onStopSignal(server, () => agent.destroy());
