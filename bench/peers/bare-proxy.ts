// The ceiling (issue 14): a bare http-proxy-3 with a keep-alive agent, no policy, no logging: the
// plain Node proxy a user would write. tollgate forwards on undici's pool (src/gateway/proxy.ts;
// ./bare-undici.ts is that library used the plain way); the server options here are the ones it uses.
// Run as its own process by the benchmark:
//   node --import tsx bench/peers/bare-proxy.ts <upstream-url> <key-id> <plan>
// Prints one JSON line `{"msg":"bare proxy listening","url":…}` on stdout.
//
// With BENCH_TLS_CERT and BENCH_TLS_KEY (--transport tls,h2): the same proxy on one
// http2.createSecureServer with allowHTTP1, as tollgate's TLS listener (src/http/tls-listener.ts),
// with its TLS options (secureContextOptions: TLS 1.2 minimum, the same ciphers and curves), so
// HTTP/1.1 and HTTP/2 are chosen by ALPN. http-proxy-3 takes HTTP/2 compat requests (it drops the
// pseudo-header fields, takes Host from :authority, and sends no connection-specific fields back).
//
// The bundled backend answers only requests carrying a valid gateway assertion, so this proxy adds
// one for the benchmark's key (./identity.ts), so the backend does the same work behind every proxy.
import { Agent, createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createSecureServer, type Http2ServerRequest, type Http2ServerResponse } from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';
import { createProxyServer } from 'http-proxy-3';
import { loadTlsMaterial, secureContextOptions } from '../../src/http/tls-context.js';
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

const serverOptions = { headersTimeout: 10_000, requestTimeout: 60_000, keepAliveTimeout: 65_000, maxHeaderSize: 16 * 1024 };
const handle = (req: IncomingMessage | Http2ServerRequest, res: ServerResponse | Http2ServerResponse) => {
  const request = req as IncomingMessage;
  const response = res as ServerResponse;
  identify(request.headers, keyId, plan, assertion());
  proxy.web(request, response, {}, () => {
    if (response.headersSent) return void response.destroy();
    response.statusCode = 502;
    response.end();
  });
};

const { BENCH_TLS_CERT: certFile, BENCH_TLS_KEY: keyFile } = process.env;
if (certFile && keyFile) {
  const tls = loadTlsMaterial({ cert: certFile, key: keyFile, sni: [] });
  const server = createSecureServer(
    {
      allowHTTP1: true,
      ALPNProtocols: ['h2', 'http/1.1'],
      ...secureContextOptions(tls.default),
      settings: { maxConcurrentStreams: 100 },
      // noDelay left at a TLS server's default (false), as tollgate's listener has it (node:http
      // turns it on for plain HTTP). Tried on both proxies: no clear difference over TLS or HTTP/2.
    },
    handle,
  );
  // The HTTP/1.1 side reads these as the plain server's options.
  Object.assign(server, serverOptions);
  const sockets = new Set<Socket>();
  server.on('secureConnection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  server.listen(0, '127.0.0.1', () => {
    const { port } = server.address() as AddressInfo;
    process.stdout.write(`${JSON.stringify({ msg: 'bare proxy listening', url: `https://127.0.0.1:${port}` })}\n`);
  });
  const stop = () => {
    server.close(() => process.exit(0));
    for (const socket of sockets) socket.destroy();
    agent.destroy();
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
} else {
  const server = createServer(serverOptions, handle);
  server.listen(0, '127.0.0.1', () => {
    const { port } = server.address() as AddressInfo;
    process.stdout.write(`${JSON.stringify({ msg: 'bare proxy listening', url: `http://127.0.0.1:${port}` })}\n`);
  });
  onStopSignal(server, () => agent.destroy());
}
