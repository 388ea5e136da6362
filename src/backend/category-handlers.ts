import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { BackendDeps } from './backend-deps.js';
import { CategoryStoreUnavailableError } from './category-store.js';
import { readJsonBody } from '../http/read-json-body.js';
import { errorReply, type Reply } from './reply.js';
import { validateNewCategory } from './validate-category.js';

const STORE_UNAVAILABLE_MESSAGE = 'The category store is unavailable; retry shortly.';

/**
 * The list is the same for every consumer and changes only on POST: any cache may keep it for a
 * few seconds (`public, max-age`), and after that revalidate it by its strong ETag, a digest of
 * the list itself (the same on every backend replica, whichever store they share).
 */
const LIST_CACHE_CONTROL = 'public, max-age=5';

/** listCategories: every category, ordered by id (no paging is declared); 304 when If-None-Match names the list as it is. */
export async function listCategories(req: IncomingMessage, _params: string[], deps: BackendDeps): Promise<Reply> {
  return storeUnavailableAs503(async () => {
    const list = await deps.store.list();
    const etag = `"${createHash('sha256').update(JSON.stringify(list)).digest('base64url').slice(0, 27)}"`;
    const headers = { 'cache-control': LIST_CACHE_CONTROL, etag };
    if (ifNoneMatch(req.headers['if-none-match'], etag)) return { status: 304, body: undefined, headers };
    return { status: 200, body: list, headers };
  });
}

/** RFC 9110 §13.1.2 for GET/HEAD: weak comparison, `*` matches any current representation. */
function ifNoneMatch(value: string | undefined, etag: string): boolean {
  if (value === undefined) return false;
  if (value.trim() === '*') return true;
  return value.split(',').some((tag) => tag.trim().replace(/^W\//, '') === etag);
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
