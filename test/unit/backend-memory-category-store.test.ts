import { describe, expect, it } from 'vitest';
import { MemoryCategoryStore } from '../../src/backend/memory-category-store.js';

describe('MemoryCategoryStore', () => {
  it('assigns ids from 1 and lists in id order', async () => {
    const store = new MemoryCategoryStore();
    expect(await store.list()).toEqual([]);
    expect(await store.create({ name: 'Dog' })).toEqual({ id: 1, name: 'Dog' });
    expect(await store.create({ name: 'Cat', description: 'Independent' })).toEqual({ id: 2, name: 'Cat', description: 'Independent' });
    expect(await store.list()).toEqual([
      { id: 1, name: 'Dog' },
      { id: 2, name: 'Cat', description: 'Independent' },
    ]);
  });

  it('hands out copies, so a caller cannot change what is stored', async () => {
    const store = new MemoryCategoryStore();
    const created = await store.create({ name: 'Dog' });
    created.name = 'changed';
    (await store.list())[0]!.name = 'changed again';
    expect(await store.list()).toEqual([{ id: 1, name: 'Dog' }]);
  });
});
