import type { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { TestRedis } from './redis-server.js';

/** A redis-server of this test file's own and a client of it, started before and stopped after the file. */
export function redisForFile(): { server: () => TestRedis; client: () => Redis } {
  let server: TestRedis | undefined;
  let client: Redis | undefined;
  beforeAll(async () => {
    server = await TestRedis.start();
    client = server.client();
  });
  afterAll(async () => {
    client?.disconnect();
    await server?.stop();
  });
  return { server: () => server!, client: () => client! };
}
