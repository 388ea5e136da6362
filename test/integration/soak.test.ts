import autocannon, { type Result } from 'autocannon';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSockets, residentBytes } from '../helpers/open-sockets.js';
import { TestRedis } from '../helpers/redis-server.js';
import {
  bearer,
  configCopy,
  createKey,
  slackRedisTimeout,
  startBackend,
  startGateway,
  type CreatedKey,
  type GatewayHandle,
} from '../helpers/stack.js';

// SOAK_REQUESTS (default 50,000; `npm run soak` sends 200,000) requests through the real gateway
// and backend: open sockets must not grow and memory must stay bounded. (A soak, not a benchmark:
// nothing here is timed.) The gateway's heap is capped at 64 MiB, below what a leak of a kilobyte
// a request over 50,000 requests would need on top of the gateway's own heap, so a leak ends in
// an out-of-memory crash and failed requests; RSS alone is a loose check, since V8 grows its heap
// lazily (it once grew 66 MiB here with nothing leaking).

let redis: TestRedis;
let backend: Awaited<ReturnType<typeof startBackend>>;
let gateway: GatewayHandle;
let key: CreatedKey;
const REQUESTS = Number(process.env.SOAK_REQUESTS ?? 50_000);

beforeAll(async () => {
  redis = await TestRedis.start();
  backend = await startBackend({});
  // A soak checks leaks, not shedding: a Redis reply late behind this loaded machine's loop would
  // be shed with 503 gateway_overloaded (src/gateway/policies/enforce-quota.ts, storeFailed), so
  // Redis gets a slack command timeout here.
  const configDir = configCopy({ 'gateway.yaml': slackRedisTimeout });
  gateway = await startGateway({
    REDIS_URL: redis.url,
    UPSTREAM_URL: backend.url,
    TOLLGATE_CONFIG_DIR: configDir,
    NODE_OPTIONS: '--max-old-space-size=64',
  });
  key = await createKey(redis, ['--plan', 'enterprise', '--per-minute', '100000000', '--per-day', '1000000000']);
});

afterAll(async () => {
  await gateway?.process.stop();
  await backend?.process.stop();
  await redis?.stop();
});

function load(amount: number): Promise<Result> {
  return new Promise((resolve, reject) => {
    autocannon({ url: `${gateway.url}/v1/categories`, connections: 50, amount, headers: bearer(key.key), timeout: 60 }, (err, result) =>
      err ? reject(err) : resolve(result),
    );
  });
}

describe('soak', () => {
  it(
    `serves ${REQUESTS.toLocaleString('en')} requests with no growth in open sockets and bounded memory`,
    { timeout: 1_800_000 },
    async () => {
      const pid = gateway.process.child.pid!;
      const warm = await load(10_000);
      expect(warm['2xx']).toBe(10_000);
      await expect.poll(() => openSockets(pid), { timeout: 30_000 }).toBeLessThan(200);
      const socketsBefore = openSockets(pid);
      const rssBefore = residentBytes(pid);

      const result = await load(REQUESTS);
      expect(result.errors).toBe(0);
      expect(result.timeouts).toBe(0);
      expect(result['2xx'], `statuses: ${JSON.stringify(result.statusCodeStats)}`).toBe(REQUESTS);

      // Client connections closed; upstream keep-alive pool back to its steady size.
      await expect.poll(() => openSockets(pid), { timeout: 30_000, interval: 250 }).toBeLessThanOrEqual(socketsBefore + 5);
      const rssAfter = residentBytes(pid);
      expect(rssAfter - rssBefore).toBeLessThan(128 * 1024 * 1024);
      expect((await fetch(`${gateway.adminUrl}/healthz`)).status).toBe(200);
    },
  );
});
