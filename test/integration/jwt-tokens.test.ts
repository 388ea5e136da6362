import { createPublicKey } from 'node:crypto';
import { base64url, CompactEncrypt, exportSPKI, importJWK, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../harness/free-port.js';
import { JwksServer, mint, signingKey, type SigningKey } from '../helpers/jwks-server.js';
import { RecordingUpstream } from '../helpers/recording-upstream.js';
import { TestRedis } from '../helpers/redis-server.js';
import { configCopy, getFrom, slackRedisTimeout, startGateway, type GatewayHandle } from '../helpers/stack.js';

// JWT access tokens against a key set the test serves itself: what is admitted (and as whom), and
// a negative corpus of every refusal, each a 401 invalid_token with an RFC 6750 challenge that
// never reaches the upstream and never echoes the token.

const ISSUER = 'https://idp.test/realms/pets';
const AUDIENCE = 'pets-api';

let redis: TestRedis;
let jwks: JwksServer;
let upstream: RecordingUpstream;
let gateway: GatewayHandle;
let key: SigningKey;
let ecKey: SigningKey;

const now = () => Math.floor(Date.now() / 1000);
const claims = (extra: Record<string, unknown> = {}) => ({
  iss: ISSUER,
  aud: AUDIENCE,
  sub: 'user-1',
  exp: now() + 600,
  iat: now(),
  ...extra,
});

beforeAll(async () => {
  [redis, jwks, upstream] = await Promise.all([TestRedis.start(), new JwksServer().start(), new RecordingUpstream().start()]);
  key = await signingKey('rsa-1');
  ecKey = await signingKey('ec-1', 'ES256');
  jwks.keys = [key.publicJwk, ecKey.publicJwk];
  const deadPort = await freePort();
  const config = configCopy({
    'gateway.yaml': (text) =>
      slackRedisTimeout(text) +
      `
jwt:
  issuers:
    - name: test-idp
      issuer: ${ISSUER}
      jwksUri: ${jwks.url}
      audiences: [${AUDIENCE}, other-api]
      plan: { claim: tier, map: { gold: pro }, default: free }
      clockSkewSeconds: 30
    - name: fwd-idp
      issuer: https://forwarding.test
      jwksUri: ${jwks.url}
      audiences: [${AUDIENCE}]
      plan: { default: free }
      forwardToken: true
    - name: dead-idp
      issuer: https://dead.test
      jwksUri: http://127.0.0.1:${deadPort}/jwks
      audiences: [${AUDIENCE}]
      plan: { default: free }
`,
  });
  gateway = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: upstream.url, TOLLGATE_CONFIG_DIR: config });
});

afterAll(async () => {
  await gateway?.process.stop();
  await Promise.all([redis?.stop(), jwks?.stop(), upstream?.stop()]);
});

const call = (token: string, path = '/v1/categories', from = '127.0.0.2') =>
  getFrom(from, gateway.url + path, { authorization: `Bearer ${token}` });

describe('a valid token', () => {
  it('is admitted as jwt:<issuer>:<subject> on the mapped plan; the upstream gets the assertion, not the token', async () => {
    const token = await mint(key, claims({ tier: 'gold' }));
    const before = upstream.requests.length;
    const res = await call(token);
    expect(res.status).toBe(200);
    expect(res.headers['x-ratelimit-limit']).toBe('300'); // plans.yaml: pro, 300 a minute
    const seen = upstream.requests[before]!;
    expect(upstream.header(seen, 'x-tollgate-consumer-id')).toEqual(['jwt:test-idp:user-1']);
    expect(upstream.header(seen, 'x-tollgate-plan')).toEqual(['pro']);
    expect(upstream.header(seen, 'x-tollgate-assertion')).toHaveLength(1);
    expect(upstream.header(seen, 'authorization')).toEqual([]);
    expect(seen.raw.toString('latin1')).not.toContain(token);
  });

  it('gets the default plan for an unmapped or missing claim: a token never names its own plan', async () => {
    for (const tier of ['enterprise', undefined]) {
      const res = await call(await mint(key, claims({ sub: 'user-2', tier })));
      expect(res.status).toBe(200);
      expect(res.headers['x-ratelimit-limit']).toBe('60'); // free
    }
  });

  it('is verified with an EC key too (alg from the list, key of the matching type)', async () => {
    expect((await call(await mint(ecKey, claims({ sub: 'user-ec' })))).status).toBe(200);
  });

  it('shares one quota per subject across tokens, and /v1/usage answers for it', async () => {
    const a = await mint(key, claims({ sub: 'user-usage', tier: 'gold' }));
    const b = await mint(key, claims({ sub: 'user-usage', tier: 'gold', jti: 'another' }));
    expect((await call(a)).status).toBe(200);
    expect((await call(b)).status).toBe(200);
    const usage = await call(b, '/v1/usage');
    expect(usage.status).toBe(200);
    expect(JSON.parse(usage.body)).toMatchObject({ id: 'jwt:test-idp:user-usage', plan: 'pro', minute: { used: 2, limit: 300 } });
  });

  it('goes upstream as well only where the issuer says forwardToken: true', async () => {
    const token = await mint(key, claims({ iss: 'https://forwarding.test', sub: 'user-fwd' }));
    const before = upstream.requests.length;
    expect((await call(token)).status).toBe(200);
    const seen = upstream.requests[before]!;
    expect(upstream.header(seen, 'authorization')).toEqual([`Bearer ${token}`]);
    expect(upstream.header(seen, 'x-tollgate-consumer-id')).toEqual(['jwt:fwd-idp:user-fwd']);
  });

  it('names an odd subject by a digest: no braces in Redis hash tags, bounded length', async () => {
    const before = upstream.requests.length;
    expect((await call(await mint(key, claims({ sub: '{evil}:' + 'x'.repeat(300) })))).status).toBe(200);
    const [id] = upstream.header(upstream.requests[before]!, 'x-tollgate-consumer-id');
    expect(id).toMatch(/^jwt:test-idp:~[A-Za-z0-9_-]{32}$/);
  });
});

describe('the negative corpus', () => {
  const refusals: Array<[string, () => Promise<string>, RegExp]> = [
    ['wrong iss', () => mint(key, claims({ iss: 'https://evil.test' })), /accepted issuer/],
    ['iss of a configured issuer, signed by another', async () => mint(await signingKey('rsa-1'), claims()), /signature is invalid/],
    ['wrong aud', () => mint(key, claims({ aud: 'someone-else' })), /audience/],
    ['expired (beyond the skew)', () => mint(key, claims({ exp: now() - 120 })), /expired/],
    ['no exp', () => mint(key, { iss: ISSUER, aud: AUDIENCE, sub: 'user-1' }), /expiry/],
    ['nbf in the future (beyond the skew)', () => mint(key, claims({ nbf: now() + 300 })), /not valid yet/],
    ['no subject', () => mint(key, claims({ sub: undefined })), /no subject/],
    ['alg none', async () => unsigned({ alg: 'none', typ: 'JWT' }, claims()), /algorithm that is not accepted/],
    ['HS256 signed with the public key bytes (algorithm confusion)', () => hmacWithPublicKey(key), /algorithm that is not accepted/],
    ['alg RS256 on an EC key id', async () => mint({ ...key, kid: 'ec-1' }, claims()), /No key of the issuer/],
    ['jku header', () => mint(key, claims(), { jku: 'https://evil.test/jwks' }), /Key-locating/],
    ['x5u header', () => mint(key, claims(), { x5u: 'https://evil.test/cert.pem' }), /Key-locating/],
    ['embedded jwk header', async () => embeddedJwk(), /Key-locating/],
    [
      'unknown crit',
      async () => signedRaw(key, { alg: 'RS256', kid: 'rsa-1', crit: ['exp-policy'], 'exp-policy': 1 }, claims()),
      /critical header/,
    ],
    ['JWE (encrypted)', () => encrypted(key), /JWE/],
    ['larger than 8 KiB', () => mint(key, claims({ padding: 'x'.repeat(9000) })), /8 KiB/],
    ['bad signature', async () => flipLastChar(await mint(key, claims())), /signature is invalid/],
    ['unknown kid', async () => mint(await signingKey('rsa-unknown'), claims()), /No key of the issuer/],
    ['two segments', async () => (await mint(key, claims())).split('.').slice(0, 2).join('.'), /not a compact JWS/],
    ['garbage in the header segment', async () => 'e30x.' + (await mint(key, claims())).split('.').slice(1).join('.'), /malformed/],
  ];

  it.each(refusals)('%s: 401 invalid_token with an RFC 6750 challenge, not forwarded, token not echoed', async (_name, make, why) => {
    const token = await make();
    const before = upstream.requests.length;
    const res = await call(token, '/v1/categories', '127.0.0.3');
    expect(res.status).toBe(401);
    const body = JSON.parse(res.body) as { code: string; message: string };
    expect(body.code).toBe('invalid_token');
    expect(body.message).toMatch(why);
    const challenge = String(res.headers['www-authenticate']);
    expect(challenge).toMatch(/^Bearer realm="tollgate", error="invalid_token", error_description="[\x20\x21\x23-\x5b\x5d-\x7e]+"$/);
    for (const part of token.split('.').filter((p) => p.length > 8)) {
      expect(challenge).not.toContain(part);
      expect(res.body).not.toContain(part);
    }
    // Counted as a failed authentication of this address, like a bad key.
    expect(res.headers['ratelimit-policy']).toMatch(/^"unauthenticated"/);
    expect(upstream.requests.length).toBe(before);
  });

  it('an unknown kid refetches the key set at most once per 30 s', async () => {
    const before = jwks.fetches;
    for (let i = 0; i < 5; i++)
      expect((await call(await mint(await signingKey(`flood-${i}`), claims()), '/v1/categories', '127.0.0.4')).status).toBe(401);
    expect(jwks.fetches - before).toBeLessThanOrEqual(1);
  });
});

describe('an identity provider that never gave a key set', () => {
  it('is 503 identity_provider_unavailable with Retry-After, not the client’s fault', async () => {
    const res = await call(await mint(key, { ...claims(), iss: 'https://dead.test' }));
    expect(res.status).toBe(503);
    expect(JSON.parse(res.body)).toMatchObject({ code: 'identity_provider_unavailable', status: 503 });
    expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  });
});

describe('logs', () => {
  it('never carry a token, valid or refused', async () => {
    const valid = await mint(key, claims({ sub: 'user-log' }));
    const bad = flipLastChar(await mint(key, claims({ sub: 'user-log' })));
    const ids = [await call(valid), await call(bad, '/v1/categories', '127.0.0.5')].map((r) => r.headers['x-request-id']);
    const signature = (t: string) => t.split('.')[2]!;
    // Access-log lines are written as each exchange ends: wait for both.
    for (const id of ids) await gateway.process.waitForLog('request', 10_000, (line) => line.reqId === id);
    const output = gateway.process.output();
    expect(output).toContain('"keyId":"jwt:test-idp:user-log"');
    expect(output).not.toContain(signature(valid));
    expect(output).not.toContain(signature(bad));
    expect(output).not.toContain(valid.split('.')[1]!);
  });
});

function flipLastChar(token: string): string {
  const last = token.at(-2) === 'A' ? 'B' : 'A';
  return token.slice(0, -2) + last + token.slice(-1);
}

function unsigned(header: object, payload: object): string {
  return `${base64url.encode(JSON.stringify(header))}.${base64url.encode(JSON.stringify(payload))}.`;
}

/** The classic confusion: HS256 "signed" with the issuer's public key as the HMAC secret. */
async function hmacWithPublicKey(k: SigningKey): Promise<string> {
  const pem = await exportSPKI((await importJWK(k.publicJwk, 'RS256', { extractable: true })) as CryptoKey);
  return new SignJWT(claims()).setProtectedHeader({ alg: 'HS256', kid: k.kid }).sign(new TextEncoder().encode(pem));
}

/** A token carrying its own key (the attacker's) in the header. */
async function embeddedJwk(): Promise<string> {
  const attacker = await signingKey('rsa-1');
  return mint(attacker, claims(), { jwk: attacker.publicJwk });
}

/** Signed by hand, for headers jose's signer would refuse to produce (an unknown crit). */
async function signedRaw(k: SigningKey, header: object, payload: object): Promise<string> {
  const input = `${base64url.encode(JSON.stringify(header))}.${base64url.encode(JSON.stringify(payload))}`;
  const signature = await crypto.subtle.sign('RSASSA-PKCS1-v1_5', k.privateKey, new TextEncoder().encode(input));
  return `${input}.${base64url.encode(new Uint8Array(signature))}`;
}

async function encrypted(k: SigningKey): Promise<string> {
  const publicKey = createPublicKey({ key: k.publicJwk as never, format: 'jwk' });
  return new CompactEncrypt(new TextEncoder().encode(JSON.stringify(claims())))
    .setProtectedHeader({ alg: 'RSA-OAEP-256', enc: 'A256GCM', kid: k.kid })
    .encrypt(publicKey);
}
