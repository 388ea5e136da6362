import { afterAll, beforeAll } from 'vitest';
import { EchoUpstream } from './echo-upstream.js';
import { TollgateProcess } from './processes.js';
import { TestRedis } from './redis-server.js';
import { bearer, configCopy, createKey, slackRedisTimeout, startGateways, type CreatedKey, type GatewayHandle } from './stack.js';

/**
 * For the quota feature tests (costs, shadow plans, gcra, owners): one config directory, run two
 * ways, both real processes: three gateways sharing a real redis-server in front of an echo
 * upstream, and `tollgate up` on the embedded store (its demo key per plan stands in for the CLI,
 * which needs Redis). Started before the file's tests and stopped after.
 */
export interface QuotaStack {
  redis: () => TestRedis;
  gateways: () => GatewayHandle[];
  /** A key made with the CLI on the Redis stack. */
  newKey: (args: string[]) => Promise<CreatedKey>;
  /** One request through Redis gateway `i % 3`. */
  send: (key: string, i: number, path?: string, method?: string) => Promise<Response>;
  /** The embedded `tollgate up`: its URL and its demo key of `plan`. */
  embedded: () => { url: string; keyOf: (plan: string) => string; process: TollgateProcess };
  configDir: () => string;
}

export type GatewaysStack = Pick<QuotaStack, 'redis' | 'gateways' | 'configDir' | 'newKey' | 'send'>;

/**
 * Three real gateways on one real redis-server in front of an echo upstream, on the config
 * directory `makeConfig()` returns: started before the file's tests, stopped after.
 */
export function threeGateways(makeConfig: () => string, gatewayEnv: Record<string, string> = {}): GatewaysStack {
  let redis: TestRedis;
  let upstream: EchoUpstream;
  let configDir = '';
  const gateways: GatewayHandle[] = [];
  beforeAll(async () => {
    configDir = makeConfig();
    redis = await TestRedis.start();
    upstream = await new EchoUpstream().start();
    gateways.push(...(await startGateways(3, { redisUrl: redis.url, upstreamUrl: upstream.url, configDir, env: gatewayEnv })));
  }, 180_000);
  afterAll(async () => {
    await Promise.all(gateways.map((g) => g.process.stop()));
    await upstream?.stop();
    await redis?.stop();
  });
  return {
    redis: () => redis,
    gateways: () => gateways,
    configDir: () => configDir,
    newKey: (args) => createKey(redis, args, configDir),
    send: (key, i, path = '/v1/categories', method = 'GET') =>
      fetch(`${gateways[i % gateways.length]!.url}${path}`, { method, headers: bearer(key) }),
  };
}

export function quotaStack(
  plansYaml: string,
  gatewayEdit: (yaml: string) => string = (y) => y,
  /** More environment for the Redis stack's gateways (month-windows.test.ts: a test clock). */
  gatewayEnv: Record<string, string> = {},
): QuotaStack {
  const stack = threeGateways(
    () => configCopy({ 'plans.yaml': () => plansYaml, 'gateway.yaml': (y) => gatewayEdit(slackRedisTimeout(y)) }),
    gatewayEnv,
  );
  let up: TollgateProcess | undefined;
  let upUrl = '';
  const demoKeys = new Map<string, string>();

  beforeAll(async () => {
    up = TollgateProcess.spawn(['up'], {
      GATEWAY_PORT: '0',
      ADMIN_PORT: '0',
      BACKEND_PORT: '0',
      REDIS_URL: undefined,
      TOLLGATE_CONFIG_DIR: stack.configDir(),
    });
    upUrl = await up.listening('gateway');
    const deadline = Date.now() + 5000;
    while (!up.output().includes('Try:') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    for (const match of up.output().matchAll(/^ {2}(\w+)\s+(tg_\S+)$/gm)) demoKeys.set(match[1]!, match[2]!);
  });

  afterAll(async () => {
    await up?.stop();
  });

  return {
    ...stack,
    embedded: () => ({
      url: upUrl,
      process: up!,
      keyOf: (plan) => {
        const key = demoKeys.get(plan);
        if (!key) throw new Error(`no demo key for plan ${plan} in: ${up!.output()}`);
        return key;
      },
    }),
  };
}
