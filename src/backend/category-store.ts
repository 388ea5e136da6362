import type { Category, NewCategory } from './category.js';

/**
 * Where categories live: Redis when configured (they survive a restart and are shared by every
 * backend process), memory otherwise. Handlers know only this interface.
 */
export interface CategoryStore {
  /** Every category, ordered by id. */
  list(): Promise<Category[]>;
  /** Assigns the next id (1, 2, 3, …) and stores the category. */
  create(input: NewCategory): Promise<Category>;
  close(): Promise<void>;
}

/**
 * The store could not be reached or did not answer in time. Handlers answer 503 for it; every
 * other error is a fault of ours (500).
 */
export class CategoryStoreUnavailableError extends Error {
  constructor(cause: unknown) {
    super(`category store unavailable: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'CategoryStoreUnavailableError';
  }
}
