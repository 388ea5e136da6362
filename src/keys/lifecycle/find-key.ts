import type { KeyRecord } from '../record.js';
import type { LifecycleDeps } from './deps.js';
import { LifecycleError } from './lifecycle-error.js';

/** The record of `id`, or a key_not_found refusal. */
export async function findKey(deps: LifecycleDeps, id: string): Promise<KeyRecord> {
  const record = await deps.keys.get(id);
  if (!record) throw notFound(id);
  return record;
}

export function notFound(id: string): LifecycleError {
  return new LifecycleError('key_not_found', `no key with id "${id}"`);
}
