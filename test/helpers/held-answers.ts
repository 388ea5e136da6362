import { expect } from 'vitest';
import { EchoUpstream } from './echo-upstream.js';
import { FaultProxy } from './fault-proxy.js';
import { TestRedis } from './redis-server.js';
import { bearer, configCopy, startGateway, type CreatedKey, type GatewayHandle } from './stack.js';

/** One request's answer as the fault tests judge it: status, error code, and the degraded mark. */
export async function answerOf(
  gateway: GatewayHandle,
  key: CreatedKey,
): Promise<{ status: number; code?: string; degraded: string | null }> {
  const res = await fetch(`${gateway.url}/v1/categories`, { headers: bearer(key.key), signal: AbortSignal.timeout(30_000) });
  const body = await res.text();
  const code = res.status === 200 ? undefined : (JSON.parse(body) as { code?: string }).code;
  return { status: res.status, code, degraded: res.headers.get('x-tollgate-degraded') };
}

/**
 * Until the gateway's change notices (tg:invalidate) are subscribed: the gap declared at their
 * subscription (every cached record suspect, a read under way not kept) is over before a test
 * holds a read. The subscriber's other channels (lease notices, cache events) may come first, so
 * the channel itself is asked for, not the subscriber's count of channels.
 */
export async function changeNoticesSubscribed(redis: TestRedis): Promise<void> {
  const client = redis.client();
  try {
    const subscribers = async () => Number(((await client.call('PUBSUB', 'NUMSUB', 'tg:invalidate')) as [string, number])[1]);
    await expect.poll(subscribers).toBeGreaterThan(0);
  } finally {
    client.disconnect();
  }
}

/** A gateway whose Redis is behind a fault proxy of the test's own, with an upstream that echoes. */
export interface ProxiedGateway {
  redis: TestRedis;
  proxy: FaultProxy;
  gateway: GatewayHandle;
  configDir: string;
  /** A request of `key`, as `answerOf` tells it. */
  call(key: CreatedKey): ReturnType<typeof answerOf>;
  stop(): Promise<void>;
}

/** Starts one, gateway.yaml edited by `gatewayYaml` (and other files by `edits`, as configCopy's). */
export async function proxiedGateway(
  gatewayYaml: (yaml: string) => string,
  edits: Record<string, (text: string) => string> = {},
): Promise<ProxiedGateway> {
  const redis = await TestRedis.start();
  const proxy = await FaultProxy.start(redis.port);
  const upstream = await new EchoUpstream().start();
  const configDir = configCopy({ ...edits, 'gateway.yaml': gatewayYaml });
  const gateway = await startGateway({ REDIS_URL: proxy.url, UPSTREAM_URL: upstream.url, TOLLGATE_CONFIG_DIR: configDir });
  return {
    redis,
    proxy,
    gateway,
    configDir,
    call: (key) => answerOf(gateway, key),
    stop: async () => {
      await gateway.process.stop();
      await proxy.stop();
      await upstream.stop();
      await redis.stop();
    },
  };
}

/** Until a request of `key` reads no key record in Redis: its record is cached, fresh, on the gateway. */
export async function recordCached(stack: ProxiedGateway, key: CreatedKey): Promise<void> {
  const client = stack.redis.client();
  try {
    const recordReads = async () => Number(/cmdstat_hgetall:calls=(\d+)/.exec(await client.info('commandstats'))?.[1] ?? 0);
    await expect
      .poll(async () => {
        const before = await recordReads();
        expect((await stack.call(key)).status).toBe(200);
        return (await recordReads()) - before;
      })
      .toBe(0);
  } finally {
    client.disconnect();
  }
}
