import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { CONFIG_DIR } from '../test/harness/tollgate.js';
import { workDir } from './processes.js';

/**
 * `tollgate-jwt`: tollgate called with a JWT access token instead of an API key, beside `tollgate`
 * in the same rounds: the cost of a JWT caller. The bench is its own identity provider: a JWKS
 * served from this process (fetched once by the gateway) and one RS256 token, valid for a day,
 * on a plan as roomy as the key's own quotas, so neither side is ever refused.
 */
export const JWT_TARGET = 'tollgate-jwt';
const ISSUER = 'https://bench-idp.invalid';
const AUDIENCE = 'bench-api';

export interface BenchIssuer {
  jwksUrl: string;
  headers: Record<string, string>;
  close(): Promise<void>;
}

/** A key pair, its JWKS on loopback, and the run's token. */
export async function startBenchIssuer(): Promise<BenchIssuer> {
  const { privateKey, publicKey } = await generateKeyPair('RS256');
  const jwks = JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: 'bench-1', alg: 'RS256', use: 'sig' }] });
  const server = createServer((_req, res) =>
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=3600' }).end(jwks),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const token = await new SignJWT({ tier: 'bench' })
    .setProtectedHeader({ alg: 'RS256', kid: 'bench-1', typ: 'at+jwt' })
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setSubject('bench')
    .setIssuedAt()
    .setExpirationTime('24h')
    .sign(privateKey);
  return {
    jwksUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`,
    headers: { authorization: `Bearer ${token}` },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** The shipped config with the bench's issuer in gateway.yaml and its roomy plan in plans.yaml. */
export function jwtConfig(jwksUrl: string, suffix: string): string {
  const dir = join(workDir(), `config-${JWT_TARGET}${suffix}`);
  cpSync(CONFIG_DIR, dir, { recursive: true });
  const gateway = join(dir, 'gateway.yaml');
  const issuer = ['jwt:', '  issuers:', '    - name: bench-idp', `      issuer: ${ISSUER}`, `      jwksUri: ${jwksUrl}`];
  issuer.push(`      audiences: [${AUDIENCE}]`, '      plan: { default: bench }', '');
  writeFileSync(gateway, readFileSync(gateway, 'utf8') + '\n' + issuer.join('\n'));
  const plans = join(dir, 'plans.yaml');
  const before = readFileSync(plans, 'utf8');
  const after = before.replace(/^plans:\n/m, 'plans:\n  bench: { perMinute: 100000000, perDay: 1000000000 }\n');
  if (after === before) throw new Error(`${JWT_TARGET}: the shipped plans.yaml has no "plans:" line to edit`);
  writeFileSync(plans, after);
  return dir;
}
