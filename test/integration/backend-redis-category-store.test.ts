import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CategoryStoreUnavailableError } from '../../src/backend/category-store.js';
import { CATEGORIES, CATEGORY_SEQUENCE, RedisCategoryStore } from '../../src/backend/redis-category-store.js';
import { connectRedis, whenReady } from '../../src/store/redis/connect.js';
import { TestRedis } from '../helpers/redis-server.js';

describe('RedisCategoryStore', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await TestRedis.start();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  async function openStore() {
    const client = connectRedis(redis.url, 'gateway', 250);
    client.on('error', () => {});
    await whenReady(client, 5_000);
    return new RedisCategoryStore(client);
  }

  it('takes ids from the sequence and stores id → {name, description} in one hash', async () => {
    await redis.flush();
    const store = await openStore();
    try {
      expect(await store.create({ name: 'Dog' })).toEqual({ id: 1, name: 'Dog' });
      expect(await store.create({ name: 'Cat', description: 'Independent' })).toEqual({ id: 2, name: 'Cat', description: 'Independent' });
      const inspect = redis.client();
      expect(await inspect.get(CATEGORY_SEQUENCE)).toBe('2');
      expect(await inspect.hgetall(CATEGORIES)).toEqual({ '1': '{"name":"Dog"}', '2': '{"name":"Cat","description":"Independent"}' });
      inspect.disconnect();
    } finally {
      await store.close();
    }
  });

  it('lists numerically by id, whatever order Redis returns', async () => {
    await redis.flush();
    const inspect = redis.client();
    await inspect.hset(CATEGORIES, '10', '{"name":"Ten"}', '9', '{"name":"Nine"}', '100', '{"name":"Hundred"}', '2', '{"name":"Two"}');
    inspect.disconnect();
    const store = await openStore();
    try {
      expect((await store.list()).map((c) => c.id)).toEqual([2, 9, 10, 100]);
    } finally {
      await store.close();
    }
  });

  it('reports a corrupt entry as a plain fault, not as the store being unavailable', async () => {
    await redis.flush();
    const inspect = redis.client();
    await inspect.hset(CATEGORIES, '1', '{"description":"no name"}');
    inspect.disconnect();
    const store = await openStore();
    try {
      const failure = await store.list().catch((err: unknown) => err);
      expect(failure).toBeInstanceOf(Error);
      expect(failure).not.toBeInstanceOf(CategoryStoreUnavailableError);
      expect((failure as Error).message).toMatch(/corrupt category entry "1"/);
    } finally {
      await store.close();
    }
  });

  it('reports an unreachable Redis as CategoryStoreUnavailableError', async () => {
    const client = connectRedis('redis://127.0.0.1:1', 'gateway', 250);
    client.on('error', () => {});
    const store = new RedisCategoryStore(client);
    await expect(store.list()).rejects.toBeInstanceOf(CategoryStoreUnavailableError);
    await expect(store.create({ name: 'Dog' })).rejects.toBeInstanceOf(CategoryStoreUnavailableError);
    await store.close();
  });
});
