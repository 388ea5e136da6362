import type { RedisClient } from '../store/redis/connect.js';
import { categoryOf, type Category, type NewCategory } from './category.js';
import { CategoryStoreUnavailableError, type CategoryStore } from './category-store.js';

// The backend owns these keys; the gateway's live in src/store/redis/redis-keys.ts.
export const CATEGORIES = '{tg:categories}:items';
export const CATEGORY_SEQUENCE = '{tg:categories}:seq';

// Layout: CATEGORY_SEQUENCE is a counter (INCR, so the first id is 1); CATEGORIES is a hash
// id → JSON of the NewCategory ({"name", "description"?}). The id is the hash field, not repeated
// in the value, so the two can never disagree.
//
// Both keys share the `{tg:categories}` hash tag, so one script can touch both on Redis Cluster.
// Taking the id and storing the category in one script makes creation atomic (no id is ever
// taken without its category) and costs one round trip.
const CREATE_SCRIPT = `
local id = redis.call('INCR', KEYS[1])
redis.call('HSET', KEYS[2], id, ARGV[1])
return id
`;

interface RedisWithCreateScript {
  tgCreateCategory(sequenceKey: string, categoriesKey: string, json: string): Promise<number>;
}

export class RedisCategoryStore implements CategoryStore {
  constructor(private readonly redis: RedisClient) {
    redis.defineCommand('tgCreateCategory', { numberOfKeys: 2, lua: CREATE_SCRIPT });
  }

  async list(): Promise<Category[]> {
    const jsonById = await unavailableOnFailure(() => this.redis.hgetall(CATEGORIES));
    return Object.entries(jsonById)
      .map(([id, json]) => parseStored(id, json))
      .sort((a, b) => a.id - b.id);
  }

  async create(input: NewCategory): Promise<Category> {
    // Only the declared fields are stored, whatever else the object carries.
    const stored = JSON.stringify(input, ['name', 'description']);
    const id = await unavailableOnFailure(() =>
      (this.redis as unknown as RedisWithCreateScript).tgCreateCategory(CATEGORY_SEQUENCE, CATEGORIES, stored),
    );
    return categoryOf(Number(id), input);
  }

  async close(): Promise<void> {
    try {
      await this.redis.quit();
    } catch {
      // Not connected (or not answering): nothing to flush, just drop the connection.
      this.redis.disconnect();
    }
  }
}

async function unavailableOnFailure<T>(command: () => Promise<T>): Promise<T> {
  try {
    return await command();
  } catch (err) {
    throw new CategoryStoreUnavailableError(err);
  }
}

/** A stored entry we cannot read is corrupt data, a fault (500), not an unavailable store. */
function parseStored(idField: string, json: string): Category {
  const id = Number(idField);
  const value = JSON.parse(json) as { name?: unknown; description?: unknown };
  if (
    !Number.isSafeInteger(id) ||
    id < 1 ||
    typeof value.name !== 'string' ||
    (value.description !== undefined && typeof value.description !== 'string')
  ) {
    throw new Error(`corrupt category entry ${JSON.stringify(idField)} in ${CATEGORIES}`);
  }
  // categoryOf copies only name and description, so nothing else stored can leak out.
  return categoryOf(id, value as NewCategory);
}
