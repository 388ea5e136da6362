// What the throughput phase speaks to the proxies (--transport): plain HTTP/1.1 (`http`, the
// default), HTTP/1.1 over TLS (`tls`, wrk against https://) and HTTP/2 over TLS (`h2`, h2load,
// ./h2load.ts). For the TLS ones, the bare proxy and tollgate each get a second process with the
// same certificate, made for the run by openssl in its scratch directory (no key kept anywhere).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { connect as http2Connect } from 'node:http2';
import { join } from 'node:path';

export const TRANSPORT_NAMES = ['http', 'tls', 'h2'] as const;
export type Transport = (typeof TRANSPORT_NAMES)[number];

export const TRANSPORT_LABELS: Record<Transport, string> = {
  http: 'HTTP/1.1',
  tls: 'HTTP/1.1 over TLS',
  h2: 'HTTP/2 over TLS',
};

/** The targets that get a TLS twin, with every --compare and --variant build (the others: plain HTTP only). */
export const TLS_TARGET_NAMES: readonly string[] = ['bare', 'tollgate'];

export interface Certificate {
  certFile: string;
  keyFile: string;
  /** The certificate, PEM: the CA the run's own TLS clients trust. */
  pem: Buffer;
}

/**
 * A self-signed ECDSA P-256 certificate for 127.0.0.1 and localhost, valid a day, written into
 * `dir` (the run's scratch directory, removed at its end). Every TLS target is given this one.
 */
export function makeCertificate(dir: string): Certificate {
  const certFile = join(dir, 'tls-cert.pem');
  const keyFile = join(dir, 'tls-key.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      keyFile,
      '-out',
      certFile,
      '-days',
      '1',
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=IP:127.0.0.1,DNS:localhost',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  return { certFile, keyFile, pem: readFileSync(certFile) };
}

/**
 * One GET over TLS that trusts only `ca`: over HTTP/1.1, or HTTP/2 (ALPN h2 only, so a listener
 * without HTTP/2 fails here rather than in the middle of a round).
 */
export function tlsGet(
  url: string,
  headers: Record<string, string>,
  ca: Buffer,
  transport: 'tls' | 'h2',
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  if (transport === 'tls') {
    return new Promise((resolve, reject) => {
      const req = httpsRequest(url, { headers, ca, agent: false }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      });
      req.on('error', reject);
      req.end();
    });
  }
  return new Promise((resolve, reject) => {
    const { origin, pathname, search } = new URL(url);
    const session = http2Connect(origin, { ca, ALPNProtocols: ['h2'] });
    session.on('error', reject);
    const stream = session.request({ ':path': pathname + search, ...headers });
    let status = 0;
    let head: Record<string, string | string[] | undefined> = {};
    let body = '';
    stream.on('response', (h) => {
      status = Number(h[':status']);
      head = h;
    });
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => (body += chunk));
    stream.on('end', () => {
      session.close();
      resolve({ status, headers: head, body });
    });
    stream.on('error', (err) => {
      session.destroy();
      reject(err);
    });
    stream.end();
  });
}
