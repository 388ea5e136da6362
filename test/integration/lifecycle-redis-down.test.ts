import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, ADMIN_TOKENS } from '../helpers/admin-client.js';
import { Contract } from '../helpers/contract.js';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, createKey, startGateway, type GatewayHandle } from '../helpers/stack.js';

// The key lifecycle while Redis is down. Expiry is judged from the key record a replica holds, so
// it holds while the record is served from cache (staleSeconds): an expired key must not ride out
// an outage. The admin API answers an Error body, and logs no hash from the failed command.

let redis: TestRedis;
let upstream: EchoUpstream;
let gateway: GatewayHandle;

beforeAll(async () => {
  redis = await TestRedis.start();
  upstream = await new EchoUpstream().start();
  gateway = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: upstream.url, TOLLGATE_ADMIN_TOKENS: ADMIN_TOKENS });
});

afterAll(async () => {
  await gateway?.process.stop();
  await upstream?.stop();
  await redis?.stop();
});

describe('while Redis is down', () => {
  it('refuses a cached key with 401 api_key_expired once its expiresAt passes, and the admin API answers Error bodies', async () => {
    // The key must still be valid for two requests (one with Redis up, one after killing it) and
    // expire soon after. How long those steps take depends on the machine, so the margin is not
    // fixed: a request that must be judged before expiresAt but whose answer arrived after it proves
    // nothing either way, and the scenario starts over with twice the margin.
    let marginMs = 3000;
    let expiresAt: string;
    let key: Awaited<ReturnType<typeof createKey>>;
    let redisDown = false;
    try {
      for (;;) {
        expiresAt = new Date(Date.now() + marginMs).toISOString();
        const created = await createKey(redis, ['--plan', 'free', '--expires-at', expiresAt]).catch((err: Error) => {
          // The CLI rightly refuses an expiry that passed while it started: the margin was too short.
          if (Date.now() >= Date.parse(expiresAt) && /must be in the future/.test(err.message)) return undefined;
          throw err;
        });
        if (!created) {
          marginMs *= 2;
          continue;
        }
        key = created;
        // Validated (and cached) while Redis is up.
        const up = await fetch(`${gateway.url}/v1/categories`, { headers: bearer(key.key) });
        if (Date.now() < Date.parse(expiresAt)) {
          expect(up.status).toBe(200);
          await redis.kill();
          redisDown = true;
          const before = await fetch(`${gateway.url}/v1/categories`, { headers: bearer(key.key) });
          if (Date.now() < Date.parse(expiresAt)) {
            expect(before.status).toBe(200); // still usable from cache, quotas in the local fallback
            expect(before.headers.get('x-tollgate-degraded')).toBe('quota-local');
            break;
          }
          await redis.launch();
          redisDown = false;
        }
        expect(marginMs, 'margin needed to use a key twice before it expires').toBeLessThan(60_000);
        marginMs *= 2;
      }

      const waitMs = Date.parse(expiresAt) - Date.now();
      if (waitMs > 0) await new Promise((r) => setTimeout(r, waitMs + 50));
      const after = await fetch(`${gateway.url}/v1/categories`, { headers: bearer(key.key) });
      expect(after.status).toBe(401);
      const body = (await after.json()) as { code: string; message: string };
      expect(body.code).toBe('api_key_expired');
      expect(body.message).toContain(expiresAt.replace(/\.\d{3}Z$/, ''));

      // The admin API cannot change anything: a documented Error body, nothing half-logged.
      const contract = await Contract.load('openapi-admin.yaml', '/admin/v1');
      for (const [method, path, body] of [
        ['POST', '/keys', { plan: 'free' }],
        ['PATCH', `/keys/${key.id}`, { name: 'x' }],
        ['GET', '/audit', undefined],
      ] as const) {
        const answer = await admin(gateway.adminUrl, method, path, { body });
        expect(answer.status, `${method} ${path}`).toBe(500);
        expect(answer.body).toMatchObject({ code: 'internal_error', status: 500 });
        expect(contract.check(answer)).toEqual([]);
      }
      await gateway.process.waitForLog('admin request failed');
      expect(gateway.process.output()).not.toContain(createHash('sha256').update(key.key).digest('hex'));
    } finally {
      // Back up for afterAll (TestRedis.stop() waits for an exit it already saw after kill()).
      if (redisDown) await redis.launch();
    }
  }, 240_000);
});
