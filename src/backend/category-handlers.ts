import type { IncomingMessage } from 'node:http';
import type { BackendDeps } from './backend-deps.js';
import { CategoryStoreUnavailableError } from './category-store.js';
import { readJsonBody } from '../http/read-json-body.js';
import { errorReply, type Reply } from './reply.js';
import { validateNewCategory } from './validate-category.js';

const STORE_UNAVAILABLE_MESSAGE = 'The category store is unavailable; retry shortly.';

/** listCategories: every category, ordered by id (no paging is declared). */
export async function listCategories(_req: IncomingMessage, _params: string[], deps: BackendDeps): Promise<Reply> {
  return storeUnavailableAs503(async () => ({ status: 200, body: await deps.store.list() }));
}

/** createCategory: 201 with the created category and its Location. */
export async function createCategory(req: IncomingMessage, _params: string[], deps: BackendDeps): Promise<Reply> {
  const body = await readJsonBody(req, deps.maxBodyBytes);
  if (!body.ok) return errorReply(body.code, body.message);
  const validation = validateNewCategory(body.value);
  if (!validation.ok) return errorReply('invalid_body', validation.message);
  return storeUnavailableAs503(async () => {
    const category = await deps.store.create(validation.category);
    return { status: 201, body: category, headers: { location: `/v1/categories/${category.id}` } };
  });
}

async function storeUnavailableAs503(answer: () => Promise<Reply>): Promise<Reply> {
  try {
    return await answer();
  } catch (err) {
    if (err instanceof CategoryStoreUnavailableError) return errorReply('service_unavailable', STORE_UNAVAILABLE_MESSAGE);
    throw err;
  }
}
