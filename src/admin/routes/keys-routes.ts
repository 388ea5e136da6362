import { KEY_ID_PATTERN } from '../../keys/format.js';
import { revokeKey, updateKey } from '../../keys/lifecycle/change-key.js';
import { createKey } from '../../keys/lifecycle/create-key.js';
import { findKey } from '../../keys/lifecycle/find-key.js';
import { changeKeyCredits, keyCredits } from '../../keys/lifecycle/key-credits.js';
import { keyUsage } from '../../keys/lifecycle/key-usage.js';
import { LifecycleError } from '../../keys/lifecycle/lifecycle-error.js';
import { listKeys } from '../../keys/lifecycle/list-keys.js';
import { rotateKey } from '../../keys/lifecycle/rotate-key.js';
import { unbanKey } from '../../keys/lifecycle/unban-key.js';
import { publicView } from '../../keys/record.js';
import type { AdminDeps, AdminRoute } from '../admin-route.js';

/** Keys: create, list, read, change, revoke, rotate, unban, usage, credits (each change audited by the lifecycle). */
export function keysRoutes({ lifecycle }: AdminDeps): AdminRoute[] {
  return [
    {
      method: 'POST',
      path: '/keys',
      action: 'keys.create',
      handle: async (r) => {
        const { record, key } = await createKey(lifecycle, await r.body(), r.caller);
        return { status: 201, body: { ...record, key }, headers: { location: `/admin/v1/keys/${record.id}` } };
      },
    },
    {
      method: 'GET',
      path: '/keys',
      action: 'keys.list',
      handle: async (r) => ({ status: 200, body: await listKeys(lifecycle, r.query, r.caller.label) }),
    },
    {
      method: 'GET',
      path: '/keys/{id}',
      action: 'keys.read',
      handle: async (r) => ({ status: 200, body: publicView(await findKey(lifecycle, keyId(r.params))) }),
    },
    {
      method: 'PATCH',
      path: '/keys/{id}',
      action: 'keys.update',
      handle: async (r) => ({ status: 200, body: await updateKey(lifecycle, keyId(r.params), await r.body(), r.caller) }),
    },
    {
      method: 'DELETE',
      path: '/keys/{id}',
      action: 'keys.revoke',
      handle: async (r) => ({ status: 200, body: await revokeKey(lifecycle, keyId(r.params), r.caller) }),
    },
    {
      method: 'POST',
      path: '/keys/{id}/rotate',
      action: 'keys.rotate',
      handle: async (r) => {
        const { record, key } = await rotateKey(lifecycle, keyId(r.params), await r.body(), r.caller);
        return { status: 200, body: { ...record, key } };
      },
    },
    {
      method: 'DELETE',
      path: '/keys/{id}/ban',
      action: 'keys.unban',
      handle: async (r) => ({ status: 200, body: await unbanKey(lifecycle, keyId(r.params), r.caller) }),
    },
    {
      method: 'GET',
      path: '/keys/{id}/usage',
      action: 'keys.usage',
      handle: async (r) => ({ status: 200, body: await keyUsage(lifecycle, keyId(r.params)) }),
    },
    {
      method: 'GET',
      path: '/keys/{id}/credits',
      action: 'keys.usage',
      handle: async (r) => ({ status: 200, body: await keyCredits(lifecycle, keyId(r.params)) }),
    },
    {
      method: 'POST',
      path: '/keys/{id}/credits',
      action: 'keys.credits',
      handle: async (r) => ({ status: 200, body: await changeKeyCredits(lifecycle, keyId(r.params), await r.body(), r.caller) }),
    },
  ];
}

/** A malformed id names no key; it is not echoed (it may be a pasted secret key). */
function keyId(params: Record<string, string>): string {
  const id = params.id!;
  if (!KEY_ID_PATTERN.test(id))
    throw new LifecycleError('key_not_found', 'no key has that id (key ids are 12 lowercase letters or digits)');
  return id;
}
