import { X509Certificate, createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createSecureContext, type SecureContext, type SecureContextOptions } from 'node:tls';

/** The PEM files of the public listener (gateway.tls, paths already absolute: settings.ts). */
export interface TlsFiles {
  cert: string;
  key: string;
  sni: ReadonlyArray<{ serverName: string; cert: string; key: string }>;
}

/**
 * TLS 1.2 at least; OpenSSL negotiates the highest version both sides speak, so 1.3 whenever the
 * client has it. The cipher list is Mozilla's "intermediate" profile (v5.7): the three TLS 1.3
 * suites, then for TLS 1.2 only ECDHE key exchange with AEAD ciphers (forward secrecy, no CBC, no
 * RSA key transport, no SHA-1). docs/security.md states it.
 */
export const TLS_MIN_VERSION = 'TLSv1.2';
export const TLS_CIPHERS = [
  'TLS_AES_128_GCM_SHA256',
  'TLS_AES_256_GCM_SHA384',
  'TLS_CHACHA20_POLY1305_SHA256',
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305',
  'ECDHE-RSA-CHACHA20-POLY1305',
].join(':');
const ECDH_CURVES = 'X25519:prime256v1:secp384r1';

/** One certificate chain and its key, read and checked. */
export interface TlsPair {
  cert: Buffer;
  key: Buffer;
  /** SHA-256 fingerprint of the leaf, as logged on every (re)load. */
  fingerprint256: string;
  subject: string;
  validTo: string;
}

/** Everything the listener serves: the default pair and the SNI ones, each as a ready context. */
export interface TlsMaterial {
  default: TlsPair;
  sni: ReadonlyArray<{ serverName: string; pair: TlsPair; context: SecureContext }>;
}

/** The options every secure context of the listener shares, with one pair. */
export function secureContextOptions(pair: TlsPair): SecureContextOptions {
  return { cert: pair.cert, key: pair.key, minVersion: TLS_MIN_VERSION, ciphers: TLS_CIPHERS, ecdhCurve: ECDH_CURVES };
}

/**
 * Reads and checks every pair. Throws (naming the file) when a file is missing, is not PEM, or the
 * key does not belong to the certificate: a half-written swap is refused, never served.
 */
export function loadTlsMaterial(files: TlsFiles): TlsMaterial {
  return {
    default: loadPair(files.cert, files.key),
    sni: files.sni.map(({ serverName, cert, key }) => {
      const pair = loadPair(cert, key);
      return { serverName: serverName.toLowerCase(), pair, context: createSecureContext(secureContextOptions(pair)) };
    }),
  };
}

function loadPair(certPath: string, keyPath: string): TlsPair {
  const cert = readPem(certPath);
  const key = readPem(keyPath);
  let leaf: X509Certificate;
  try {
    leaf = new X509Certificate(cert);
  } catch (err) {
    throw new Error(`${certPath}: not a PEM certificate (${(err as Error).message})`, { cause: err });
  }
  let matches: boolean;
  try {
    matches = leaf.checkPrivateKey(createPrivateKey(key));
  } catch (err) {
    throw new Error(`${keyPath}: not a PEM private key (${(err as Error).message})`, { cause: err });
  }
  if (!matches) throw new Error(`${keyPath} is not the private key of the certificate in ${certPath}`);
  // What OpenSSL itself would refuse (a chain it cannot parse, a key type it cannot use).
  try {
    createSecureContext({ cert, key });
  } catch (err) {
    throw new Error(`${certPath} with ${keyPath}: ${(err as Error).message}`, { cause: err });
  }
  return { cert, key, fingerprint256: leaf.fingerprint256, subject: leaf.subject.replace(/\n/g, ', '), validTo: leaf.validTo };
}

function readPem(path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new Error(`${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, { cause: err });
  }
}

/**
 * The SNI entry for a server name: an exact name first, then `*.example.com` for exactly one
 * label in front of `example.com` (RFC 6125 §6.4.3); undefined sends the default certificate.
 */
export function sniContext(material: TlsMaterial, serverName: string): SecureContext | undefined {
  const name = serverName.toLowerCase();
  const exact = material.sni.find((entry) => entry.serverName === name);
  if (exact) return exact.context;
  const dot = name.indexOf('.');
  if (dot <= 0) return undefined;
  const wildcard = '*' + name.slice(dot);
  return material.sni.find((entry) => entry.serverName === wildcard)?.context;
}
