import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newApiKey } from '../../src/keys/format.js';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, configCopy, getFrom, startGateway, type GatewayHandle } from '../helpers/stack.js';

// The failed-authentication limit counts a client as the anonymous tier does (anonymous-consumer.ts):
// an IPv6 client per /64 (it may use any address in it), an IPv4-mapped address as its IPv4. Else
// one host behind the trusted proxy gets a fresh budget of guesses with every address it picks.

let redis: TestRedis;
let upstream: EchoUpstream;
let gateway: GatewayHandle;

beforeAll(async () => {
  redis = await TestRedis.start();
  upstream = await new EchoUpstream().start();
  const config = configCopy({ 'gateway.yaml': (t) => t.replace(/(unauthenticated:\s*\n\s*perMinute:) 60/, '$1 3') });
  gateway = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: upstream.url, TOLLGATE_CONFIG_DIR: config, TRUST_PROXY_HOPS: '1' });
});

afterAll(async () => {
  await gateway?.process.stop();
  await upstream?.stop();
  await redis?.stop();
});

async function statusFrom(client: string): Promise<number> {
  const res = await getFrom('127.0.0.1', `${gateway.url}/v1/categories`, { ...bearer(newApiKey().key), 'x-forwarded-for': client });
  return res.status;
}

describe('failed-authentication limit per client', () => {
  it('counts every address of one IPv6 /64 together', async () => {
    const statuses: number[] = [];
    for (let i = 1; i <= 5; i++) statuses.push(await statusFrom(`2001:db8:7:7::${i.toString(16)}`));
    expect(statuses).toEqual([401, 401, 401, 429, 429]);
    expect(await statusFrom('2001:db8:7:8::1')).toBe(401); // the next /64 is another client
  });

  it('counts an IPv4-mapped address as its IPv4', async () => {
    const statuses = [];
    for (const client of ['198.51.100.9', '::ffff:198.51.100.9', '198.51.100.9', '::ffff:c633:6409'])
      statuses.push(await statusFrom(client));
    expect(statuses).toEqual([401, 401, 401, 429]);
  });
});
