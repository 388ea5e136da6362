import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { TestRedis } from '../helpers/redis-server.js';
import {
  bearer,
  configCopy,
  createKey,
  getFrom,
  slackRedisTimeout,
  startGateways,
  testPlans,
  withRulesAndAnonymous,
  type GatewayHandle,
} from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// A remembered rule refusal (gateway/rule-refusals.ts) is one counter's, named by the values the
// gateway trusts: a key varying a header its rule counts by is asked again of the other value's
// counter and stays refused for the first; the address is the one http/proxy-trust.ts trusts, never
// what a client writes in X-Forwarded-For (an untrusted peer can neither escape its own refusal by
// naming another address nor be answered from another address's, and behind a trusted proxy a
// forged earlier hop is not counted); a reload that raises the rule's limit ends the memory of it.
// Each case asks the same gateway several times, so the answers after the first refusal come from
// its memory.

const LIMIT = 3;
const RULES = `limits:
  - { name: per-address, match: { path: /v1/categories }, by: [client.address], perDay: ${LIMIT} }
  - { name: per-tenant, match: { path: /v1/pets }, by: ['header:x-tenant'], perDay: ${LIMIT} }
`;

let redis: TestRedis;
let upstream: EchoUpstream;
let direct: GatewayHandle;
let behindProxy: GatewayHandle;
let configDir: string;

beforeAll(async () => {
  [redis, upstream] = await Promise.all([TestRedis.start(), new EchoUpstream().start()]);
  configDir = configCopy({
    'plans.yaml': () =>
      testPlans(2, { afterRejections: 20, window: 60, duration: 60 }).replace(
        'plans:\n',
        'plans:\n  public: { perMinute: 100000, perDay: 100000 }\n',
      ),
    'gateway.yaml': (text) => withRulesAndAnonymous(RULES, 'public', ['/v1/categories'])(slackRedisTimeout(text)),
  });
  const common = { redisUrl: redis.url, upstreamUrl: upstream.url, configDir };
  const [plain, proxied] = await Promise.all([
    startGateways(1, common),
    startGateways(1, { ...common, env: { TRUSTED_PROXIES: '127.0.0.50/32' } }),
  ]);
  [direct, behindProxy] = [plain[0]!, proxied[0]!];
}, 200_000);

afterAll(async () => {
  await Promise.all([direct?.process.stop(), behindProxy?.process.stop()]);
  await upstream?.stop();
  await redis?.stop();
});

/** The statuses of `count` requests one after another from `from`, with X-Forwarded-For `xff` if given. */
function statuses(gateway: GatewayHandle, from: string, count: number, xff?: string): Promise<number[]> {
  return answers(`${gateway.url}/v1/categories`, from, count, xff ? { 'x-forwarded-for': xff } : {});
}

async function answers(url: string, from: string, count: number, headers: Record<string, string>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < count; i++) {
    const res = await getFrom(from, url, headers);
    out.push(res.status);
    if (res.status === 429) expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  }
  return out;
}

/** Rule refusals `gateway` answered from memory (its /metrics). */
async function fromMemory(gateway: GatewayHandle): Promise<number> {
  const text = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
  return Number(
    /^tollgate_quota_decisions_total\{[^}]*decision="rule_limited"[^}]*source="local_cache"[^}]*\} (\d+)$/m.exec(text)?.[1] ?? 0,
  );
}

const refused = (n: number) => Array.from({ length: n }, () => 429);
const admitted = (n: number) => Array.from({ length: n }, () => 200);

describe('a remembered rule refusal and the values a client sends', () => {
  it('is one header value’s: another value is asked of its own counter, and the refused one stays refused', async () => {
    await awayFromDayEdge(120);
    const { key } = await createKey(redis, ['--plan', 'pro'], configDir);
    const tenant = (name: string, count: number) =>
      answers(`${direct.url}/v1/pets`, '127.0.0.31', count, { ...bearer(key), 'x-tenant': name });
    expect(await tenant('t1', LIMIT + 2)).toEqual([...admitted(LIMIT), ...refused(2)]);
    expect(await tenant('t2', LIMIT + 1)).toEqual([...admitted(LIMIT), ...refused(1)]);
    expect(await tenant('t1', 2)).toEqual(refused(2));
  });

  it('from an untrusted peer: X-Forwarded-For neither escapes the refusal nor borrows another address’s', async () => {
    await awayFromDayEdge(120);
    expect(await statuses(direct, '127.0.0.21', LIMIT + 2)).toEqual([...admitted(LIMIT), ...refused(2)]);
    // The same peer naming other addresses: still its own counter, refused from memory.
    expect(await statuses(direct, '127.0.0.21', 3, '127.0.0.22')).toEqual(refused(3));
    expect(await statuses(direct, '127.0.0.21', 3, '198.51.100.7, 127.0.0.22')).toEqual(refused(3));
    // Another peer naming the refused address: its own counter, admitted to its limit.
    expect(await statuses(direct, '127.0.0.22', LIMIT + 1, '127.0.0.21')).toEqual([...admitted(LIMIT), ...refused(1)]);
    expect(await fromMemory(direct)).toBeGreaterThan(0);
  });

  it('behind a trusted proxy: the hop it appended is counted, a forged earlier hop is not', async () => {
    await awayFromDayEdge(120);
    const proxy = '127.0.0.50';
    expect(await statuses(behindProxy, proxy, LIMIT + 1, '203.0.113.1')).toEqual([...admitted(LIMIT), ...refused(1)]);
    // The client forges an earlier hop; the proxy appends the address it saw: still refused.
    expect(await statuses(behindProxy, proxy, 3, '203.0.113.2, 203.0.113.1')).toEqual(refused(3));
    // Another client behind the same proxy: not answered from the first one's refusal.
    expect(await statuses(behindProxy, proxy, LIMIT + 1, '203.0.113.1, 203.0.113.2')).toEqual([...admitted(LIMIT), ...refused(1)]);
    // Not through the proxy, naming the refused client: the peer is counted, admitted.
    expect(await statuses(behindProxy, '127.0.0.23', 1, '203.0.113.1')).toEqual(admitted(1));
    expect(await fromMemory(behindProxy)).toBeGreaterThan(0);
  });

  // Last: it reloads the shared config of both gateways.
  it('is dropped when a reload raises the rule’s limit: the same key and value, on the same gateway, is asked again', async () => {
    await awayFromDayEdge(120);
    const { key } = await createKey(redis, ['--plan', 'pro'], configDir);
    const tenant = (count: number) => answers(`${direct.url}/v1/pets`, '127.0.0.32', count, { ...bearer(key), 'x-tenant': 'reloaded' });
    expect(await tenant(LIMIT + 2)).toEqual([...admitted(LIMIT), ...refused(2)]);
    const reloaded = [direct, behindProxy].map((g) => g.process.waitForLog('config reloaded', 30_000));
    const path = join(configDir, 'gateway.yaml');
    const raised = readFileSync(path, 'utf8').replace(
      `by: ['header:x-tenant'], perDay: ${LIMIT} }`,
      `by: ['header:x-tenant'], perDay: ${LIMIT + 2} }`,
    );
    expect(raised).toContain(`perDay: ${LIMIT + 2} }`);
    writeFileSync(`${path}.next`, raised);
    renameSync(`${path}.next`, path);
    await Promise.all(reloaded);
    expect(await tenant(3)).toEqual([...admitted(2), ...refused(1)]);
  });
});
