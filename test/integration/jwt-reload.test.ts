import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, EdgeRulesStack } from '../helpers/edge-rules-stack.js';
import { JwksServer, mint, signingKey, type SigningKey } from '../helpers/jwks-server.js';

// `jwt:` follows gateway.yaml in a running gateway (docs/identity-providers.md, docs/operations.md):
// an issuer added, an audience and a plan map changed, an issuer removed, each taken on the next
// request, tokens verified before the edit included; an invalid edit refused whole, the issuers in
// force still serving as they were.

const A = 'https://a.idp.test';
const B = 'https://b.idp.test';
const C = 'https://c.idp.test';

interface IssuerYaml {
  name: string;
  issuer: string;
  audiences: string[];
  map?: Record<string, string>;
  algorithms?: string[];
}

let jwks: JwksServer;
let key: SigningKey;
let stack: EdgeRulesStack;
/** The consumer id the target saw on the last request that reached it. */
let lastConsumer = '';

/** gateway.yaml as shipped with these issuers in a `jwt:` section (none: no section). */
const withIssuers =
  (...issuers: IssuerYaml[]) =>
  (yaml: string) => {
    if (issuers.length === 0) return yaml;
    const entries = issuers.map(
      (i) => `
    - name: ${i.name}
      issuer: ${i.issuer}
      jwksUri: ${jwks.url}
      audiences: [${i.audiences.join(', ')}]
      plan: { claim: tier, map: { ${Object.entries(i.map ?? {})
        .map(([k, v]) => `${k}: ${v}`)
        .join(', ')} }, default: free }${i.algorithms ? `\n      algorithms: [${i.algorithms.join(', ')}]` : ''}`,
    );
    return `${yaml}\njwt:\n  issuers:${entries.join('')}\n`;
  };

const issuerA: IssuerYaml = { name: 'idp-a', issuer: A, audiences: ['api-1'], map: { gold: 'pro' } };
const issuerB: IssuerYaml = { name: 'idp-b', issuer: B, audiences: ['api-1'] };

const token = (iss: string, extra: Record<string, unknown> = {}) => {
  const now = Math.floor(Date.now() / 1000);
  return mint(key, { iss, aud: 'api-1', sub: 'user-1', tier: 'gold', iat: now, exp: now + 600, ...extra });
};
const send = (bearerToken: string) => call(`${stack.gateway.url}/v1/categories`, { headers: { authorization: `Bearer ${bearerToken}` } });
/** The answer's status, and on a 200 the consumer and plan limit the gateway gave the caller. */
const seen = async (bearerToken: string) => {
  const reply = await send(bearerToken);
  if (reply.status !== 200) return { status: reply.status, code: reply.json?.code, description: reply.headers['www-authenticate'] };
  return { status: 200, consumer: lastConsumer, limit: reply.headers['x-ratelimit-limit'] };
};

beforeAll(async () => {
  jwks = await new JwksServer().start();
  key = await signingKey('rsa-1');
  jwks.keys = [key.publicJwk];
  stack = await EdgeRulesStack.start(withIssuers(issuerA));
  const behaviour = stack.target.behaviour;
  stack.target.behaviour = (req, res, body) => {
    lastConsumer = String(req.headers['x-tollgate-consumer-id']);
    behaviour(req, res, body);
  };
}, 120_000);

afterAll(async () => {
  await stack?.close();
  await jwks?.stop();
});

describe('jwt: in gateway.yaml, hot', () => {
  it('an added issuer is admitted from the next request', async () => {
    const fromB = await token(B);
    expect(await seen(fromB)).toMatchObject({ status: 401, code: 'invalid_token' });
    await stack.reload(withIssuers(issuerA, issuerB));
    expect(await seen(fromB)).toEqual({ status: 200, consumer: 'jwt:idp-b:user-1', limit: '60' });
  });

  it('a changed audience and plan map apply to tokens verified before the edit too', async () => {
    const forApi1 = await token(A);
    const forApi2 = await token(A, { aud: 'api-2' });
    expect(await seen(forApi1)).toEqual({ status: 200, consumer: 'jwt:idp-a:user-1', limit: '300' });
    expect(await seen(forApi2)).toMatchObject({ status: 401, code: 'invalid_token' });

    await stack.reload(withIssuers({ ...issuerA, audiences: ['api-2'], map: { gold: 'business' } }, issuerB));
    expect(await seen(forApi1)).toMatchObject({ status: 401, code: 'invalid_token', description: expect.stringContaining('audience') });
    expect(await seen(forApi2)).toEqual({ status: 200, consumer: 'jwt:idp-a:user-1', limit: '1000' });
  });

  it('a removed issuer is refused from the next request, its verified tokens included', async () => {
    const fromB = await token(B);
    expect((await seen(fromB)).status).toBe(200);
    await stack.reload(withIssuers({ ...issuerA, audiences: ['api-2'], map: { gold: 'business' } }));
    expect(await seen(fromB)).toMatchObject({ status: 401, code: 'invalid_token' });
    expect((await seen(await token(A, { aud: 'api-2' }))).status).toBe(200);
  });

  it('an invalid jwt: edit is refused whole: nothing of it applies, the issuers in force serve as before', async () => {
    const fromA = await token(A, { aud: 'api-2' });
    const fromC = await token(C);
    const refused = await stack.reload(
      withIssuers(
        { ...issuerA, audiences: ['api-2', 'api-3'], map: { gold: 'enterprise' }, algorithms: ['RS256', 'HS256'] },
        { name: 'idp-c', issuer: C, audiences: ['api-1'] },
      ),
      'config reload refused',
    );
    expect(refused.error).toMatch(/^gateway\.yaml: jwt\.issuers\.0\.algorithms\.1: "HS256": HMAC algorithms are refused/);
    expect(await seen(fromA)).toEqual({ status: 200, consumer: 'jwt:idp-a:user-1', limit: '1000' });
    expect(await seen(await token(A, { aud: 'api-3' }))).toMatchObject({ status: 401, code: 'invalid_token' });
    expect(await seen(fromC)).toMatchObject({ status: 401, code: 'invalid_token' });
  });

  it('without a jwt: section, tokens are no credential at all', async () => {
    const fromA = await token(A, { aud: 'api-2' });
    expect((await seen(fromA)).status).toBe(200);
    await stack.reload(withIssuers());
    expect((await seen(fromA)).status).toBe(401);
  });
});
