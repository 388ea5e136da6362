import { readBounded } from './jwks-cache.js';

const MAX_DOCUMENT_BYTES = 256 * 1024;
const LOOPBACK_OR_HTTPS = /^(https:\/\/|http:\/\/(127\.0\.0\.1|localhost|\[::1\])(:\d+)?(\/|$))/;

/**
 * The jwks_uri of an OpenID Provider from `{issuer}/.well-known/openid-configuration` (OpenID
 * Connect Discovery 1.0 §4). The document's `issuer` must equal the configured one exactly (§4.3):
 * otherwise a document served elsewhere could point the gateway at another party's keys.
 */
export async function discoverJwksUri(issuer: string, timeoutMs = 5000): Promise<string> {
  const url = `${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
  const res = await fetch(url, { headers: { accept: 'application/json' }, redirect: 'error', signal: AbortSignal.timeout(timeoutMs) });
  if (res.status !== 200) {
    await res.body?.cancel();
    throw new Error(`discovery document answered ${res.status}`);
  }
  const doc = JSON.parse(await readBounded(res, MAX_DOCUMENT_BYTES)) as { issuer?: unknown; jwks_uri?: unknown };
  if (doc.issuer !== issuer) throw new Error('discovery document names another issuer');
  if (typeof doc.jwks_uri !== 'string' || !LOOPBACK_OR_HTTPS.test(doc.jwks_uri)) {
    throw new Error('discovery document has no usable jwks_uri (https://, or http:// on loopback)');
  }
  return doc.jwks_uri;
}
