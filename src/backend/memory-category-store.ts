import { categoryOf, type Category, type NewCategory } from './category.js';
import type { CategoryStore } from './category-store.js';

/** Categories of one process, lost on exit. Used when no Redis is configured (the demo default). */
export class MemoryCategoryStore implements CategoryStore {
  private readonly categoriesById = new Map<number, Category>();
  private lastId = 0;

  async list(): Promise<Category[]> {
    // Ids only grow and a Map keeps insertion order, so this is already ordered by id.
    return [...this.categoriesById.values()].map((category) => ({ ...category }));
  }

  async create(input: NewCategory): Promise<Category> {
    const category = categoryOf(++this.lastId, input);
    this.categoriesById.set(category.id, category);
    return { ...category };
  }

  async close(): Promise<void> {}
}
