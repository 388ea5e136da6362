import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestRedis } from '../helpers/redis-server.js';
import { configCopy, createKey, startGateway, type CreatedKey, type GatewayHandle } from '../helpers/stack.js';

/**
 * HTTPS upstreams (issue 23, item 5): certificates verified by default, a private CA per service
 * or for upstream.url, SNI from the target's host name (or `servername`), and a client certificate
 * for an upstream that requires one. The CA and certificates are made here by openssl; no key is
 * committed.
 */
let redis: TestRedis;
let gateway: GatewayHandle;
let key: CreatedKey;
let plain: Server;
let mutual: Server;
const sniSeen: string[] = [];

function openssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
}

/** A test CA, a server certificate for `localhost` only, and a client certificate, all signed by the CA. */
function makeCertificates(dir: string): void {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl(dir, ['req', '-x509', ...ec, '-keyout', 'ca-key.pem', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=tollgate test CA']);
  // A key and a certificate `name`.pem for `subject`, signed by the CA, with `extensions` if any.
  const issue = (name: string, subject: string, extensions: string[] = []) => {
    openssl(dir, ['req', ...ec, '-keyout', `${name}-key.pem`, '-out', `${name}.csr`, '-subj', subject]);
    const signing = ['-CA', 'ca.pem', '-CAkey', 'ca-key.pem', '-CAcreateserial', '-days', '2'];
    openssl(dir, ['x509', '-req', '-in', `${name}.csr`, ...signing, '-out', `${name}.pem`, ...extensions]);
  };
  writeFileSync(join(dir, 'server.ext'), 'subjectAltName=DNS:localhost\n');
  issue('server', '/CN=localhost', ['-extfile', 'server.ext']);
  issue('client', '/CN=tollgate gateway');
}

async function httpsUpstream(dir: string, requireClientCert: boolean): Promise<Server> {
  const server = createServer(
    {
      cert: readFileSync(join(dir, 'server.pem')),
      key: readFileSync(join(dir, 'server-key.pem')),
      ca: readFileSync(join(dir, 'ca.pem')),
      requestCert: requireClientCert,
      rejectUnauthorized: requireClientCert,
    },
    (req, res) => {
      const socket = req.socket as TLSSocket;
      sniSeen.push(String(socket.servername));
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ path: req.url, client: socket.getPeerCertificate()?.subject?.CN ?? null }));
    },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

const portOf = (server: Server) => (server.address() as AddressInfo).port;

beforeAll(async () => {
  redis = await TestRedis.start();
  const config = configCopy();
  makeCertificates(config);
  plain = await httpsUpstream(config, false);
  mutual = await httpsUpstream(config, true);
  const services = `services:
  - { name: private-ca, paths: [/v1/private], targets: ["https://localhost:${portOf(plain)}"], tls: { ca: ca.pem } }
  - { name: no-ca, paths: [/v1/untrusted], targets: ["https://localhost:${portOf(plain)}"] }
  - { name: by-address, paths: [/v1/by-address], targets: ["https://127.0.0.1:${portOf(plain)}"], tls: { ca: ca.pem } }
  - { name: named, paths: [/v1/named], targets: ["https://127.0.0.1:${portOf(plain)}"], tls: { ca: ca.pem, servername: localhost } }
  - { name: mtls, paths: [/v1/mtls], targets: ["https://localhost:${portOf(mutual)}"], tls: { ca: ca.pem, cert: client.pem, key: client-key.pem } }
  - { name: mtls-no-cert, paths: [/v1/mtls-without], targets: ["https://localhost:${portOf(mutual)}"], tls: { ca: ca.pem } }
`;
  const gatewayYaml = join(config, 'gateway.yaml');
  writeFileSync(
    gatewayYaml,
    readFileSync(gatewayYaml, 'utf8')
      .replace(/^services: \[\].*$/m, services)
      .replace(/^( {2}maxSockets: 512 .*)$/m, '$1\n  tls: { ca: ca.pem }'),
  );
  gateway = await startGateway({
    REDIS_URL: redis.url,
    TOLLGATE_CONFIG_DIR: config,
    // upstream.url over https with the private CA, from the file (relative path).
    UPSTREAM_URL: `https://localhost:${portOf(plain)}`,
  });
  key = await createKey(redis, ['--plan', 'enterprise']);
});

afterAll(async () => {
  await gateway?.process.stop();
  for (const server of [plain, mutual]) {
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
  }
  await redis?.stop();
});

async function get(path: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${gateway.url}${path}`, { headers: { authorization: `Bearer ${key.key}` } });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('HTTPS upstreams', () => {
  it('a target under a private CA is reached with that CA, SNI naming its host', async () => {
    sniSeen.length = 0;
    const res = await get('/v1/private/x');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ path: '/v1/private/x', client: null });
    expect(sniSeen).toEqual(['localhost']);
  });

  it('without the CA the certificate fails verification: 502, reason logged', async () => {
    const res = await get('/v1/untrusted/x');
    expect(res.status).toBe(502);
    expect(res.body).toMatchObject({ code: 'bad_gateway' });
    const line = await gateway.process.waitForLog('upstream failed', 60_000, (l) => l.service === 'no-ca');
    expect(JSON.stringify(line.err)).toMatch(/UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED|unable to verify/i);
  });

  it('a certificate not naming the target host fails (127.0.0.1 is not in it), unless servername names it', async () => {
    const wrongName = await get('/v1/by-address/x');
    expect(wrongName.status).toBe(502);
    const line = await gateway.process.waitForLog('upstream failed', 60_000, (l) => l.service === 'by-address');
    expect(JSON.stringify(line.err)).toMatch(/ERR_TLS_CERT_ALTNAME_INVALID/);
    sniSeen.length = 0;
    const named = await get('/v1/named/x');
    expect(named.status).toBe(200);
    expect(sniSeen).toEqual(['localhost']);
  });

  it('an upstream requiring a client certificate is reached with it (mTLS), and refuses the gateway without it', async () => {
    const res = await get('/v1/mtls/x');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ client: 'tollgate gateway' });
    const without = await get('/v1/mtls-without/x');
    expect(without.status).toBe(502);
  });

  it('upstream.url over https takes upstream.tls (the private CA)', async () => {
    const res = await get('/v1/anything');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ path: '/v1/anything' });
  });
});
