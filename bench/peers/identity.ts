// What every benchmark peer adds to a request so that the bundled backend accepts it: the
// consumer headers and a signed gateway assertion, as tollgate's upstream-identity policy does,
// with tollgate's own signer: a token is signed once per key and re-signed at half its lifetime,
// so the peers spend almost nothing on it and the backend does the same work behind every proxy.
import type { IncomingHttpHeaders } from 'node:http';
import { loadSettings } from '../../src/config/settings.js';
import { AssertionSigner } from '../../src/gateway/assertion-signer.js';
import { CONSUMER_ID_HEADER, CONSUMER_PLAN_HEADER } from '../../src/gateway/upstream-headers.js';
import { ASSERTION_HEADER } from '../../src/identity/assertion.js';
import { assertionSecretsFromEnv } from '../../src/identity/assertion-secrets.js';

const signer = new AssertionSigner(assertionSecretsFromEnv(process.env).current, loadSettings(process.env).assertion, 1_000_000);

/** The assertion for a key: from the cache while fresh, else signed now. */
export function assertionFor(keyId: string, plan: string): Promise<string> {
  return Promise.resolve(signer.token(keyId, plan));
}

/** For a proxy that serves one known key (the bare proxy): read per request, from the cache while fresh. */
export function keepAssertionFresh(keyId: string, plan: string): Promise<() => string> {
  return Promise.resolve(() => signer.token(keyId, plan));
}

/** Sets the identity headers on `headers` (three assignments, the same in every peer). */
export function identify(headers: IncomingHttpHeaders, keyId: string, plan: string, assertion: string): void {
  headers[CONSUMER_ID_HEADER] = keyId;
  headers[CONSUMER_PLAN_HEADER] = plan;
  headers[ASSERTION_HEADER] = assertion;
}
