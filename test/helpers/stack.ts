import { request as httpRequest } from 'node:http';
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as harness from '../harness/tollgate.js';
import type { GatewayHandle } from '../harness/tollgate.js';
import { keysInProcess } from './keys-in-process.js';
import { CONFIG_DIR, runCli, TEST_PROCESS_ENV, type TollgateProcess } from './processes.js';
import type { TestRedis } from './redis-server.js';

export interface CreatedKey {
  id: string;
  key: string;
  plan: string;
}

/** Where the CLI finds Redis: a TestRedis (REDIS_URL), or an environment such as a TestRedisCluster's. */
export type RedisUnderTest = TestRedis | { env: Record<string, string> };

const redisEnv = (redis: RedisUnderTest) => ('env' in redis ? redis.env : { REDIS_URL: redis.url });

/** Creates a key with the CLI's `keys create`, as an operator would (in-process: see keysInProcess). */
export async function createKey(redis: RedisUnderTest, args: string[] = ['--plan', 'free'], configDir = CONFIG_DIR): Promise<CreatedKey> {
  const stdout = await keysInProcess(['create', ...args, '--json'], { ...redisEnv(redis), TOLLGATE_CONFIG_DIR: configDir });
  return JSON.parse(stdout) as CreatedKey;
}

export async function keysCli(redis: RedisUnderTest, args: string[], configDir = CONFIG_DIR) {
  return runCli(['keys', ...args], { ...redisEnv(redis), TOLLGATE_CONFIG_DIR: configDir });
}

/** A copy of the shipped config directory, with files replaced or edited by the test. */
/** gateway.yaml with quota leases on or off, whatever it shipped with (on by default). */
export function withLeases(enabled: boolean): (gatewayYaml: string) => string {
  return (yaml) => yaml.replace(/leases: \{ enabled: (true|false) \}/, `leases: { enabled: ${enabled} }`);
}

/** gateway.yaml with `rules` (a `limits:` block) in place of the shipped empty list, and GETs of `paths` admitted without a credential on `plan`. */
export function withRulesAndAnonymous(rules: string, plan: string, paths: string[]): (gatewayYaml: string) => string {
  const access = paths.map((path) => `    - { method: GET, path: ${path}, anonymous: { plan: ${plan} } }\n`).join('');
  return (yaml) => yaml.replace(/^limits: \[\][^\n]*\n/m, rules).replace(/^ {2}costs: \[\][^\n]*\n/m, `  costs: []\n  access:\n${access}`);
}

export function configCopy(edits: Record<string, (text: string) => string> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-config-'));
  cpSync(CONFIG_DIR, dir, { recursive: true });
  for (const [file, edit] of Object.entries(edits)) {
    writeFileSync(join(dir, file), edit(readFileSync(join(dir, file), 'utf8')));
  }
  return dir;
}

export type { GatewayHandle } from '../harness/tollgate.js';

/** Starts a real gateway process on free ports in front of `upstreamUrl`. */
export function startGateway(env: Record<string, string | undefined>): Promise<GatewayHandle> {
  return harness.startGateway({ ...TEST_PROCESS_ENV, ...env });
}

/**
 * `count` gateway processes on one Redis, started together and waited for patiently: on a loaded
 * machine a gateway can take longer than the harness's 25 s.
 */
export async function startGateways(
  count: number,
  {
    redisUrl,
    upstreamUrl,
    configDir,
    env: more = {},
  }: { redisUrl: string; upstreamUrl: string; configDir: string; env?: Record<string, string> },
): Promise<GatewayHandle[]> {
  const env = {
    ...TEST_PROCESS_ENV,
    ...more,
    GATEWAY_PORT: '0',
    ADMIN_PORT: '0',
    REDIS_URL: redisUrl,
    UPSTREAM_URL: upstreamUrl,
    TOLLGATE_CONFIG_DIR: configDir,
  };
  const started = Array.from({ length: count }, () => harness.startTollgate(['gateway'], env));
  const gateways: GatewayHandle[] = [];
  for (const process of started) {
    const url = await process.listening('gateway', 170_000);
    gateways.push({ process, url, adminUrl: String((await process.waitForLog('admin listening', 170_000)).url) });
  }
  return gateways;
}

export function startBackend(env: Record<string, string | undefined> = {}): Promise<{ process: TollgateProcess; url: string }> {
  return harness.startBackend({ ...TEST_PROCESS_ENV, ...env });
}

export function bearer(key: string): Record<string, string> {
  return { authorization: `Bearer ${key}` };
}

/**
 * A GET from a chosen loopback source address (127.0.0.x), so per-address limits in one test do
 * not spill into others that share 127.0.0.1.
 */
export function getFrom(
  localAddress: string,
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { localAddress, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * For tests that assert exact quotas: a Redis command timeout with room for a CPU-starved test
 * machine. With the shipped 250 ms a starved Redis reply counts as an outage, and the `local`
 * failure mode then (correctly) admits requests on per-replica limits, which is not what those
 * tests are about. 10 s (the most the schema allows): 2 s was seen to be too little with both cores
 * busy (75 of 200 admitted on a 50 plan).
 */
export const slackRedisTimeout = (gatewayYaml: string) => gatewayYaml.replace(/commandTimeoutMs: 250\b/, 'commandTimeoutMs: 10000');

/**
 * plans.yaml for quota tests: the shipped plans plus `fifty` (50 a minute and a day, for
 * exact-count tests) and `tiny` (a few a minute and a day, for 429s and bans), with the ban policy
 * a test needs. Their day is as small as their minute, so a count reaches the day's limit too: a
 * minute edge during a test resets nothing (only midnight does: see awayFromDayEdge).
 */
export function testPlans(tinyPerMinute: number, ban: { afterRejections: number; window: number; duration: number }): string {
  return `
plans:
  free:       { perMinute: 60,   perDay: 1000 }
  pro:        { perMinute: 300,  perDay: 10000 }
  business:   { perMinute: 1000, perDay: 100000 }
  enterprise: { perMinute: 3000, perDay: 1000000 }
  fifty:      { perMinute: 50,   perDay: 50 }
  tiny:       { perMinute: ${tinyPerMinute},    perDay: ${tinyPerMinute} }
ban:
  afterRejections: ${ban.afterRejections}
  window: ${ban.window}
  duration: ${ban.duration}
`;
}
