import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../harness/free-port.js';
import { AUDIENCE, CLIENT_ID, OpenIdProvider, providerKey } from '../helpers/openid-provider.js';
import { RecordingUpstream } from '../helpers/recording-upstream.js';
import { TestRedis } from '../helpers/redis-server.js';
import { configCopy, getFrom, slackRedisTimeout, startGateway, type GatewayHandle } from '../helpers/stack.js';
import { inOneMinute } from '../helpers/windows.js';

// A real OpenID Provider (oidc-provider, client-credentials grant, JWT access tokens for a
// resource) in front of two gateway replicas on one Redis: discovery, the mapped plan, the quota
// shared across replicas, a key rotation, and an IdP outage that the cached keys ride out.

const CONSUMER = `jwt:pets-idp:${CLIENT_ID}`;

let redis: TestRedis;
let upstream: RecordingUpstream;
let op: OpenIdProvider;
let port: number;
const gateways: GatewayHandle[] = [];

beforeAll(async () => {
  [redis, upstream, port] = await Promise.all([TestRedis.start(), new RecordingUpstream().start(), freePort()]);
  op = await new OpenIdProvider(port, [await providerKey('key-1')]).start();
  const config = configCopy({
    'gateway.yaml': (text) =>
      slackRedisTimeout(text) +
      `
jwt:
  issuers:
    - name: pets-idp
      issuer: ${op.issuer}
      discovery: true
      audiences: [${AUDIENCE}]
      plan: { claim: tier, map: { gold: business }, default: free }
`,
  });
  const env = { REDIS_URL: redis.url, UPSTREAM_URL: upstream.url, TOLLGATE_CONFIG_DIR: config };
  gateways.push(...(await Promise.all([startGateway(env), startGateway(env)])));
});

afterAll(async () => {
  await Promise.all(gateways.map((g) => g.process.stop()));
  await Promise.all([op?.stop(), redis?.stop(), upstream?.stop()]);
});

const call = (gateway: GatewayHandle, token: string, path = '/v1/categories', from = '127.0.0.2') =>
  getFrom(from, gateway.url + path, { authorization: `Bearer ${token}` });

describe('tokens of a real OpenID Provider', () => {
  it('are admitted after discovery, on the mapped plan; the upstream sees the consumer and no Authorization', async () => {
    const token = await op.accessToken();
    const before = upstream.requests.length;
    const res = await call(gateways[0]!, token);
    expect(res.status).toBe(200);
    expect(res.headers['x-ratelimit-limit']).toBe('1000'); // plans.yaml: business
    const seen = upstream.requests[before]!;
    expect(upstream.header(seen, 'x-tollgate-consumer-id')).toEqual([CONSUMER]);
    expect(upstream.header(seen, 'x-tollgate-plan')).toEqual(['business']);
    expect(upstream.header(seen, 'authorization')).toEqual([]);
  });

  it('share one quota across gateway replicas', async () => {
    const token = await op.accessToken();
    const usage = async () => JSON.parse((await call(gateways[1]!, token, '/v1/usage')).body) as { id: string; minute: { used: number } };
    // Counted in the minute window: tried again once if a minute edge fell inside.
    await inOneMinute(async () => {
      const start = (await usage()).minute.used;
      for (const gateway of [gateways[0]!, gateways[1]!, gateways[0]!, gateways[1]!, gateways[1]!])
        expect((await call(gateway, token)).status).toBe(200);
      const after = await usage();
      expect(after.id).toBe(CONSUMER);
      expect(after.minute.used).toBe(start + 5);
    });
  });

  it('follow a key rotation: the new key is fetched, a token of the removed key is refused', async () => {
    const oldToken = await op.accessToken(); // signed with key-1, never presented yet
    await op.stop();
    op = await new OpenIdProvider(port, [await providerKey('key-2')]).start();
    const newToken = await op.accessToken();
    // An unknown kid refetches the key set at most once per 30 s per issuer: poll until this
    // replica's next refetch is allowed and has found key-2.
    await expect
      .poll(async () => (await call(gateways[0]!, newToken, '/v1/categories', '127.0.0.6')).status, { timeout: 60_000, interval: 2000 })
      .toBe(200);
    const refused = await call(gateways[0]!, oldToken, '/v1/categories', '127.0.0.6');
    expect(refused.status).toBe(401);
    expect(JSON.parse(refused.body)).toMatchObject({ code: 'invalid_token' });
  });

  it('keep being admitted while the provider is down (the cached key set serves)', async () => {
    const token = await op.accessToken(); // key-2, never presented
    await op.stop();
    const res = await call(gateways[0]!, token);
    expect(res.status).toBe(200);
    expect(res.headers['x-ratelimit-limit']).toBe('1000');
  });
});
