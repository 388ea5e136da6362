import { expect } from 'vitest';
import type { TestRedis } from './redis-server.js';
import { bearer, type CreatedKey, type GatewayHandle } from './stack.js';

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
 * Until the gateway's change notices are subscribed: the gap declared at their subscription (every
 * cached record suspect, a read under way not kept) is over before a test holds a read.
 */
export async function changeNoticesSubscribed(redis: TestRedis): Promise<void> {
  const client = redis.client();
  try {
    const subscribed = async () =>
      String(await client.call('CLIENT', 'LIST'))
        .split('\n')
        .some((c) => /name=tollgate-subscriber .*\bsub=[1-9]/.test(c));
    await expect.poll(subscribed).toBe(true);
  } finally {
    client.disconnect();
  }
}
