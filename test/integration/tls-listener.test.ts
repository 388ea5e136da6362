import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { connect as tlsConnect } from 'node:tls';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { EdgeStack } from '../helpers/edge-stack.js';
import { curlVersionAndStatus, h2Request, h2Session } from '../helpers/h2-client.js';
import { TestCerts, type TestCert } from '../helpers/tls-certs.js';

// TLS on the public listener (issue 23, item 1), checked with the clients people use: curl,
// `openssl s_client`, Node's tls and http2 clients. Certificates are made here, in a temp dir.

let certs: TestCerts;
let served: TestCert;
let stack: EdgeStack;
const configYaml = (t: string) => t; // the shipped gateway.yaml; TLS comes from the environment

beforeAll(async () => {
  certs = new TestCerts();
  served = certs.make('served', 'localhost');
  const api = certs.make('api', 'api.test');
  // SNI needs the file: gateway.yaml gains an `sni` entry under `gateway.tls` (paths absolute here).
  stack = await EdgeStack.start({
    env: { GATEWAY_TLS_CERT: served.cert, GATEWAY_TLS_KEY: served.key },
    gatewayYaml: (t) =>
      configYaml(t).replace(
        /^gateway:\n/m,
        `gateway:\n  tls:\n    sni:\n      - { serverName: api.test, cert: ${api.cert}, key: ${api.key} }\n`,
      ),
  });
});
afterAll(async () => {
  await stack?.stop();
  certs?.remove();
});
beforeEach(() => stack.upstream.reset());

/** `openssl s_client` against the listener, with `args`; stdout and stderr together. */
function sClient(args: string[]): string {
  const result = spawnSync('openssl', ['s_client', '-connect', `127.0.0.1:${stack.port}`, ...args], {
    input: '',
    encoding: 'utf8',
    timeout: 10_000,
  });
  return result.stdout + result.stderr;
}

/** The SHA-256 fingerprint a new TLS connection is shown (servername: the SNI asked for). */
function fingerprintSeen(servername = 'localhost'): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: '127.0.0.1', port: stack.port, servername, rejectUnauthorized: false }, () => {
      resolve(socket.getPeerCertificate().fingerprint256);
      socket.destroy();
    });
    socket.once('error', reject);
  });
}

describe('protocol and ciphers (openssl s_client)', () => {
  it('TLS 1.3 is negotiated when the client has it', () => {
    expect(sClient([])).toMatch(/New, TLSv1\.3, Cipher is TLS_AES_128_GCM_SHA256/);
  });

  it('TLS 1.2 is accepted, with an ECDHE AEAD cipher', () => {
    expect(sClient(['-tls1_2'])).toMatch(/New, TLSv1\.2, Cipher is ECDHE-RSA-AES128-GCM-SHA256/);
  });

  it('TLS 1.1 and 1.0 are refused (protocol version alert)', () => {
    // OpenSSL's default security level would refuse them client-side; @SECLEVEL=0 lets it try.
    for (const flag of ['-tls1_1', '-tls1'])
      expect(sClient([flag, '-cipher', 'DEFAULT@SECLEVEL=0'])).toMatch(/alert protocol version|no protocols available/);
  });

  it('a TLS 1.2 cipher without forward secrecy or AEAD is refused', () => {
    expect(sClient(['-tls1_2', '-cipher', 'AES128-SHA'])).toMatch(/handshake failure|no shared cipher|Cipher is \(NONE\)/);
  });

  it('ALPN chooses h2 when offered, http/1.1 when that is all the client has', () => {
    expect(sClient(['-alpn', 'h2,http/1.1'])).toMatch(/ALPN protocol: h2/);
    expect(sClient(['-alpn', 'http/1.1'])).toMatch(/ALPN protocol: http\/1\.1/);
  });

  it('SNI: api.test gets its own certificate, any other name the default one', () => {
    expect(sClient(['-servername', 'api.test'])).toMatch(/subject=CN ?= ?api\.test/);
    expect(sClient(['-servername', 'other.test'])).toMatch(/subject=CN ?= ?localhost/);
  });
});

describe('HTTPS over HTTP/1.1', () => {
  it('curl --tlsv1.2 --http1.1 --cacert: 200; X-Forwarded-Proto and the access line say https', async () => {
    // Not spawnSync: the recording upstream lives in this process and must keep answering.
    const versionAndStatus = await curlVersionAndStatus(
      ['--http1.1', '--tlsv1.2', '--cacert', served.cert],
      `https://localhost:${stack.port}/v1/categories`,
      stack.key.key,
    );
    expect(versionAndStatus).toBe('1.1 200');
    expect(stack.upstream.header(stack.upstream.requests[0]!, 'x-forwarded-proto')).toEqual(['https']);
    const line = await stack.gateway.process.waitForLog(
      'request',
      60_000,
      (l) => l.reqId === stack.upstream.header(stack.upstream.requests[0]!, 'x-request-id')[0],
    );
    expect(line).toMatchObject({ scheme: 'https', status: 200 });
    expect(line.http).toBeUndefined();
  });

  it('a plain-HTTP request to the TLS port gets no HTTP answer', async () => {
    const result = spawnSync('curl', ['-sS', '-o', '/dev/null', '-w', '%{http_code}', `http://127.0.0.1:${stack.port}/v1/categories`], {
      encoding: 'utf8',
    });
    expect(result.stdout).toBe('000');
  });
});

describe('certificate reload', () => {
  it('a swap on disk is picked up without dropping an established HTTP/2 connection', async () => {
    const session = await h2Session(stack.gateway.url);
    const auth = { authorization: `Bearer ${stack.key.key}` };
    expect((await h2Request(session, { ':path': '/v1/categories', ...auth })).status).toBe(200);
    expect(await fingerprintSeen()).toBe(served.fingerprint256);

    const next = certs.make('next', 'localhost');
    certs.swap(served, next);
    await stack.gateway.process.waitForLog('TLS certificates loaded', 60_000, (l) => l.fingerprint256 === next.fingerprint256);
    // The session negotiated before the swap still carries requests.
    expect((await h2Request(session, { ':path': '/v1/categories', ...auth })).status).toBe(200);
    expect(session.destroyed).toBe(false);
    session.close();
    // New connections see the new certificate; SNI certificates are untouched.
    expect(await fingerprintSeen()).toBe(next.fingerprint256);
    served.fingerprint256 = next.fingerprint256;
    expect(sClient(['-servername', 'api.test'])).toMatch(/subject=CN ?= ?api\.test/);
  });

  it('a key that does not match the certificate is refused, logged, and the certificate in force stays', async () => {
    const stranger = certs.make('stranger', 'localhost');
    const key = readFileSync(served.key);
    writeFileSync(served.key, readFileSync(stranger.key));
    await stack.gateway.process.waitForLog('TLS certificate reload refused; the certificates in force stay', 60_000, (l) =>
      /is not the private key of the certificate/.test(String(l.error)),
    );
    expect(await fingerprintSeen()).toBe(served.fingerprint256);
    expect(sClient([])).toMatch(/New, TLSv1\.3/);
    writeFileSync(served.key, key);
  });

  it('SIGHUP reads the files again (logged even when nothing changed)', async () => {
    stack.gateway.process.child.kill('SIGHUP');
    await stack.gateway.process.waitForLog(/^TLS certificate/, 60_000, (l) => l.reason === 'SIGHUP');
  });
});
