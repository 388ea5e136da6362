import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../harness/free-port.js';
import { call, type Reply } from '../helpers/edge-rules-stack.js';
import { AUDIENCE, OpenIdProvider, providerKey } from '../helpers/openid-provider.js';
import { RecordingUpstream } from '../helpers/recording-upstream.js';
import { TestRedis } from '../helpers/redis-server.js';
import {
  bearer,
  configCopy,
  createKey,
  slackRedisTimeout,
  startGateway,
  testPlans,
  withRulesAndAnonymous,
  type GatewayHandle,
} from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// Limit rules with the rest of the gateway, end to end on a real gateway process, a real
// redis-server and a real OpenID Provider (docs/policies.md, "Limit rules"): a per-address rule on
// a route that also admits anonymous callers counts both them and keys from that address; a rule
// by the token's `org` claim is shared by two subjects of one org; and with Redis gone (the
// shipped `quota.onRedisFailure: local`, one replica) a rule still limits, from this replica's
// memory. Each client address is its own loopback source address (127.0.0.x).

const RULES = `limits:
  - { name: catalogue-per-address, match: { methods: [GET], path: /v1/categories }, by: [client.address], perDay: 4 }
  - { name: org-reports, match: { path: /v1/reports }, by: ["claim:org"], perDay: 3 }
  - { name: local-per-address, match: { path: /v1/local }, by: [client.address], perDay: 2 }
`;

let redis: TestRedis;
let upstream: RecordingUpstream;
let op: OpenIdProvider;
let gateway: GatewayHandle;
let configDir: string;

beforeAll(async () => {
  let port: number;
  [redis, upstream, port] = await Promise.all([TestRedis.start(), new RecordingUpstream().start(), freePort()]);
  op = await new OpenIdProvider(port, [await providerKey('key-1')], 'gold', {
    'acme-1': 'acme',
    'acme-2': 'acme',
    'globex-1': 'globex',
  }).start();
  configDir = configCopy({
    'plans.yaml': () =>
      testPlans(3, { afterRejections: 1000, window: 60, duration: 60 }).replace(
        'plans:\n',
        'plans:\n  public: { perMinute: 100, perDay: 100 }\n',
      ),
    'gateway.yaml': (text) =>
      withRulesAndAnonymous(RULES, 'public', ['/v1/categories'])(slackRedisTimeout(text)) +
      `
jwt:
  issuers:
    - { name: pets-idp, issuer: "${op.issuer}", discovery: true, audiences: [${AUDIENCE}], plan: { default: free } }
`,
  });
  gateway = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: upstream.url, TOLLGATE_CONFIG_DIR: configDir });
}, 120_000);

afterAll(async () => {
  await gateway?.process.stop();
  await Promise.all([op?.stop(), redis?.stop(), upstream?.stop()]);
});

const get = (path: string, address: string, headers: Record<string, string> = {}) =>
  call(`${gateway.url}${path}`, { headers, localAddress: address });
const codeOf = (reply: Reply) => (reply.status === 200 ? 'ok' : (reply.json as { code: string }).code);
const forwarded = (path: string) => upstream.requests.filter((r) => r.target.startsWith(path)).length;

describe('limit rules with anonymous callers, tokens and degraded mode', () => {
  it('counts anonymous callers and keys of one address together on a route that admits both; another address has its own', async () => {
    await awayFromDayEdge(30);
    const before = forwarded('/v1/categories');
    const anonymous = [];
    for (let i = 0; i < 3; i++) anonymous.push(await get('/v1/categories', '127.0.0.11'));
    expect(anonymous.map(codeOf)).toEqual(['ok', 'ok', 'ok']);
    expect(anonymous[0]!.headers['ratelimit-policy']).toContain('"catalogue-per-address";q=4;w=86400');
    expect(upstream.header(upstream.requests.at(-1)!, 'x-tollgate-anonymous')).toEqual(['true']);
    // A key from the same address takes the fourth unit of the address's rule, then both are refused.
    const key = await createKey(redis, ['--plan', 'free'], configDir);
    expect(codeOf(await get('/v1/categories', '127.0.0.11', bearer(key.key)))).toBe('ok');
    for (const headers of [{}, bearer(key.key)]) {
      const refused = await get('/v1/categories', '127.0.0.11', headers);
      expect([refused.status, codeOf(refused)]).toEqual([429, 'rate_limit_exceeded']);
      expect((refused.json as { message: string }).message).toContain('"catalogue-per-address"');
      expect(refused.headers['ratelimit']).toMatch(/^"catalogue-per-address";r=0;t=\d+$/);
    }
    expect(codeOf(await get('/v1/categories', '127.0.0.12'))).toBe('ok');
    expect(forwarded('/v1/categories') - before).toBe(5);
  });

  it('shares a rule by the org claim between two subjects of the OpenID Provider, not with another org or an API key', async () => {
    await awayFromDayEdge(30);
    const [a1, a2, g1] = await Promise.all(['acme-1', 'acme-2', 'globex-1'].map((id) => op.accessToken(id)));
    const codes = [];
    for (const token of [a1, a2, a1, a2]) codes.push(codeOf(await get('/v1/reports', '127.0.0.13', bearer(token!))));
    expect(codes).toEqual(['ok', 'ok', 'ok', 'rate_limit_exceeded']);
    // Two subjects, two consumers: only the org claim joins them.
    const consumers = upstream.requests.slice(-3).map((r) => upstream.header(r, 'x-tollgate-consumer-id')[0]);
    expect(new Set(consumers).size).toBe(2);
    // Another org has its own counter; an API key has no claims, so the rule is skipped for it.
    expect(codeOf(await get('/v1/reports', '127.0.0.13', bearer(g1!)))).toBe('ok');
    const key = await createKey(redis, ['--plan', 'free'], configDir);
    for (let i = 0; i < 4; i++) expect(codeOf(await get('/v1/reports', '127.0.0.13', bearer(key.key)))).toBe('ok');
  });

  it('still limits by a rule with Redis gone, in local mode, from what this replica admitted since', async () => {
    await awayFromDayEdge(30);
    const key = await createKey(redis, ['--plan', 'free'], configDir);
    // The key validated (and cached) while Redis is up.
    expect(codeOf(await get('/v1/other', '127.0.0.14', bearer(key.key)))).toBe('ok');
    await redis.kill();
    const replies = [];
    for (let i = 0; i < 3; i++) replies.push(await get('/v1/local', '127.0.0.14', bearer(key.key)));
    expect(replies.map(codeOf)).toEqual(['ok', 'ok', 'rate_limit_exceeded']);
    for (const reply of replies) expect(reply.headers['x-tollgate-degraded']).toBe('quota-local');
    expect((replies[2]!.json as { message: string }).message).toContain('"local-per-address"');
    // Another address, its own local counter.
    expect(codeOf(await get('/v1/local', '127.0.0.15', bearer(key.key)))).toBe('ok');
  });
});
