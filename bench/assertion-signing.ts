/**
 * CPU per signed assertion: jose's SignJWT (WebCrypto, an async job; what the gateway used) beside
 * AssertionSigner (node:crypto's HMAC, a cache insert included), one token per key id, as a
 * gateway with many consumers signs them (each key re-signed every ttl/2). Process CPU time, so
 * the machine's other load moves it less than wall time.
 *   node --import tsx bench/assertion-signing.ts [--tokens 20000] [--rounds 3]
 */
import { webcrypto } from 'node:crypto';
import { parseArgs } from 'node:util';
import { SignJWT } from 'jose';
import { AssertionSigner } from '../src/gateway/assertion-signer.js';
import { ASSERTION_ALG } from '../src/identity/assertion.js';

const { values } = parseArgs({ options: { tokens: { type: 'string', default: '20000' }, rounds: { type: 'string', default: '3' } } });
const tokens = Number(values.tokens);
const secret = { kid: 'bench', bytes: new TextEncoder().encode('b'.repeat(48)) };
const settings = { issuer: 'tollgate', audience: 'tollgate-backend', ttlSeconds: 60, clockToleranceSeconds: 5 };
const key = await webcrypto.subtle.importKey('raw', secret.bytes, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);

/** µs of this process's CPU per call of `sign`, over `tokens` calls. */
async function cpuPerToken(sign: (i: number) => unknown): Promise<number> {
  const start = process.cpuUsage();
  for (let i = 0; i < tokens; i++) await sign(i);
  const used = process.cpuUsage(start);
  return (used.user + used.system) / tokens;
}

for (let round = 1; round <= Number(values.rounds); round++) {
  const jose = await cpuPerToken((i) => {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ plan: 'pro' })
      .setProtectedHeader({ alg: ASSERTION_ALG, typ: 'JWT', kid: secret.kid })
      .setIssuer(settings.issuer)
      .setAudience(settings.audience)
      .setSubject(`key${i}`)
      .setIssuedAt(now)
      .setExpirationTime(now + settings.ttlSeconds)
      .sign(key);
  });
  const signer = new AssertionSigner(secret, settings, tokens);
  const ours = await cpuPerToken((i) => signer.token(`key${i}`, 'pro'));
  console.log(`round ${round}: jose SignJWT ${jose.toFixed(1)} µs CPU per token, AssertionSigner ${ours.toFixed(1)} µs`);
}
