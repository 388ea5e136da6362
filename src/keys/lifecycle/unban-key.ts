import { audit } from './audit-changes.js';
import type { Caller, LifecycleDeps } from './deps.js';
import { findKey } from './find-key.js';

/** Lifts a ban on every replica at once; `unbanned` is false when the key was not banned. */
export async function unbanKey(deps: LifecycleDeps, id: string, caller: Caller): Promise<{ id: string; unbanned: boolean }> {
  await findKey(deps, id);
  const unbanned = await deps.quotas.unban(id);
  await deps.keys.announce(id); // every replica drops its cached ban at once
  await audit(deps, caller, 'key.unban', id, { banned: { before: unbanned, after: false } });
  return { id, unbanned };
}
