import { quotaFor } from '../../quota/quota-for.js';
import { quotaSubject } from '../../quota/quota-subject.js';
import { audit } from './audit-changes.js';
import type { Caller, LifecycleDeps } from './deps.js';
import { findKey } from './find-key.js';

/** Lifts a ban on every replica at once; `unbanned` is false when the key was not banned. */
export async function unbanKey(deps: LifecycleDeps, id: string, caller: Caller): Promise<{ id: string; unbanned: boolean }> {
  const record = await findKey(deps, id);
  // Under a `scope: owner` plan the ban is the owner's, shared by all of its keys.
  const quota = quotaFor(record, deps.plans());
  const subject = quota ? quotaSubject(record, quota) : id;
  const unbanned = await deps.quotas.unban(subject);
  await deps.keys.announce(subject); // every replica drops its cached ban at once
  if (subject !== id) await deps.keys.announce(id);
  await audit(deps, caller, 'key.unban', id, { banned: { before: unbanned, after: false } }, record.owner);
  return { id, unbanned };
}
