import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestCert {
  cert: string;
  key: string;
  /** SHA-256 fingerprint of the certificate, as Node's getPeerCertificate().fingerprint256 gives it. */
  fingerprint256: string;
}

/**
 * Self-signed certificates made by the tests with `openssl req -x509`, in a temp directory that is
 * removed afterwards: no private key is ever committed.
 */
export class TestCerts {
  readonly dir = mkdtempSync(join(tmpdir(), 'tollgate-tls-'));

  /** A new key and certificate for `commonName` (also its DNS name; 127.0.0.1 as an IP name). */
  make(name: string, commonName = 'localhost'): TestCert {
    const cert = join(this.dir, `${name}.cert.pem`);
    const key = join(this.dir, `${name}.key.pem`);
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '2',
        '-keyout',
        key,
        '-out',
        cert,
        '-subj',
        `/CN=${commonName}`,
        '-addext',
        `subjectAltName=DNS:${commonName},IP:127.0.0.1`,
      ],
      { stdio: 'ignore' },
    );
    return { cert, key, fingerprint256: new X509Certificate(readFileSync(cert)).fingerprint256 };
  }

  /** Copies `from`'s files over `to`'s paths (the operator's swap on disk): certificate first, then key. */
  swap(to: TestCert, from: TestCert): void {
    copyFileSync(from.cert, to.cert);
    copyFileSync(from.key, to.key);
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
