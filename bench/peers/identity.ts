// What every benchmark peer adds to a request so that the bundled backend accepts it: the
// consumer headers and a signed gateway assertion, as tollgate's upstream-identity policy does.
// A token is signed once per key and re-signed at half its lifetime, so the peers spend almost
// nothing on it (tollgate caches its assertions too) and the backend does the same work behind
// every proxy.
import type { IncomingHttpHeaders } from 'node:http';
import { SignJWT } from 'jose';
import { loadSettings } from '../../src/config/settings.js';
import { CONSUMER_ID_HEADER, CONSUMER_PLAN_HEADER } from '../../src/gateway/upstream-headers.js';
import { ASSERTION_ALG, ASSERTION_HEADER, importAssertionKey } from '../../src/identity/assertion.js';
import { assertionSecretsFromEnv } from '../../src/identity/assertion-secrets.js';

const settings = loadSettings(process.env).assertion;
const secret = assertionSecretsFromEnv(process.env).current;
const signingKey = await importAssertionKey(secret, 'sign');

interface Signed {
  token: string;
  renewAtMs: number;
}

const signed = new Map<string, Signed>();

async function sign(keyId: string, plan: string): Promise<Signed> {
  const nowSeconds = Math.floor(Date.now() / 1000);
  const token = await new SignJWT({ plan })
    .setProtectedHeader({ alg: ASSERTION_ALG, typ: 'JWT', kid: secret.kid })
    .setIssuer(settings.issuer)
    .setAudience(settings.audience)
    .setSubject(keyId)
    .setIssuedAt(nowSeconds)
    .setExpirationTime(nowSeconds + settings.ttlSeconds)
    .sign(signingKey);
  const entry = { token, renewAtMs: Date.now() + (settings.ttlSeconds * 1000) / 2 };
  signed.set(keyId, entry);
  return entry;
}

/** The assertion for a key: from the cache while fresh, else signed now. */
export async function assertionFor(keyId: string, plan: string): Promise<string> {
  const cached = signed.get(keyId);
  if (cached && cached.renewAtMs > Date.now()) return cached.token;
  return (await sign(keyId, plan)).token;
}

/**
 * For a proxy that serves one known key (the bare proxy): signed now and renewed in the
 * background, so a request reads it without waiting.
 */
export async function keepAssertionFresh(keyId: string, plan: string): Promise<() => string> {
  let token = (await sign(keyId, plan)).token;
  setInterval(() => void sign(keyId, plan).then((s) => (token = s.token)), (settings.ttlSeconds * 1000) / 2).unref();
  return () => token;
}

/** Sets the identity headers on `headers` (three assignments, the same in every peer). */
export function identify(headers: IncomingHttpHeaders, keyId: string, plan: string, assertion: string): void {
  headers[CONSUMER_ID_HEADER] = keyId;
  headers[CONSUMER_PLAN_HEADER] = plan;
  headers[ASSERTION_HEADER] = assertion;
}
