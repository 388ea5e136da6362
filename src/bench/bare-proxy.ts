// The ceiling for tollgate's proxy stack: the same http-proxy-3 with the same keep-alive upstream
// agent and server options as src/gateway/proxy.ts and server.ts, and no policy, no logging.
// Run as its own process by the benchmark:
//   node dist/bench/bare-proxy.js <upstream-url> <key-id> <plan>
// Prints one JSON line `{"msg":"bare proxy listening","url":…}` on stdout.
//
// The bundled backend answers only requests carrying a valid gateway assertion, so this proxy adds
// one, signed once per half lifetime for the benchmark's key (TOLLGATE_ASSERTION_SECRET, as the
// gateway and backend get it): three header assignments per request, so the backend does the
// same work behind both proxies.
import { Agent, createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createProxyServer } from 'http-proxy-3';
import { SignJWT } from 'jose';
import { loadSettings } from '../config/settings.js';
import { CONSUMER_ID_HEADER, CONSUMER_PLAN_HEADER } from '../gateway/upstream-headers.js';
import { ASSERTION_ALG, ASSERTION_HEADER, importAssertionKey } from '../identity/assertion.js';
import { assertionSecretsFromEnv } from '../identity/assertion-secrets.js';

const [upstream, keyId, plan] = process.argv.slice(2);
if (!upstream || !keyId || !plan) {
  process.stderr.write('usage: node dist/bench/bare-proxy.js <upstream-url> <key-id> <plan>\n');
  process.exit(2);
}

const settings = loadSettings(process.env).assertion;
const secret = assertionSecretsFromEnv(process.env).current;
const key = await importAssertionKey(secret, 'sign');
let assertion = '';
async function sign(): Promise<void> {
  const nowSeconds = Math.floor(Date.now() / 1000);
  assertion = await new SignJWT({ plan })
    .setProtectedHeader({ alg: ASSERTION_ALG, typ: 'JWT', kid: secret.kid })
    .setIssuer(settings.issuer)
    .setAudience(settings.audience)
    .setSubject(keyId!)
    .setIssuedAt(nowSeconds)
    .setExpirationTime(nowSeconds + settings.ttlSeconds)
    .sign(key);
}
await sign();
setInterval(() => void sign(), (settings.ttlSeconds * 1000) / 2).unref();

function identify(headers: IncomingHttpHeaders): void {
  headers[CONSUMER_ID_HEADER] = keyId;
  headers[CONSUMER_PLAN_HEADER] = plan;
  headers[ASSERTION_HEADER] = assertion;
}

const agent = new Agent({ keepAlive: true, maxSockets: 512, maxFreeSockets: 256, timeout: 60_000, scheduling: 'lifo' });
const proxy = createProxyServer({ target: upstream, agent, xfwd: true });

const server = createServer(
  { headersTimeout: 10_000, requestTimeout: 60_000, keepAliveTimeout: 65_000, maxHeaderSize: 16 * 1024 },
  (req, res) => {
    identify(req.headers);
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

const stop = () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
  agent.destroy();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
