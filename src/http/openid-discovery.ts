import { readBounded } from './read-bounded.js';

const MAX_DOCUMENT_BYTES = 256 * 1024;
/** Plain http only on this machine: a document or keys fetched in clear could be swapped on the way. */
export const LOOPBACK_OR_HTTPS = /^(https:\/\/|http:\/\/(127\.0\.0\.1|localhost|\[::1\])(:\d+)?(\/|$))/;

/**
 * An OpenID Provider's `{issuer}/.well-known/openid-configuration` (OpenID Connect Discovery 1.0
 * §4). The document's `issuer` must equal the configured one exactly (§4.3): otherwise a document
 * served elsewhere could point us at another party's keys and endpoints.
 */
export async function openIdConfiguration(issuer: string, timeoutMs = 5000): Promise<Record<string, unknown>> {
  const url = `${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
  const res = await fetch(url, { headers: { accept: 'application/json' }, redirect: 'error', signal: AbortSignal.timeout(timeoutMs) });
  if (res.status !== 200) {
    await res.body?.cancel();
    throw new Error(`discovery document answered ${res.status}`);
  }
  const doc = JSON.parse(await readBounded(res, MAX_DOCUMENT_BYTES)) as Record<string, unknown> | null;
  if (typeof doc !== 'object' || doc === null || doc.issuer !== issuer) throw new Error('discovery document names another issuer');
  return doc;
}

/** The document's `name` endpoint, which must be https:// (or http:// on loopback). */
export function endpointOf(doc: Record<string, unknown>, name: string): string {
  const value = doc[name];
  if (typeof value !== 'string' || !LOOPBACK_OR_HTTPS.test(value))
    throw new Error(`discovery document has no usable ${name} (https://, or http:// on loopback)`);
  return value;
}
