import { hashApiKey, newApiKey } from '../format.js';
import { publicView } from '../record.js';
import { audit, changesBetween } from './audit-changes.js';
import type { CreatedKey } from './create-key.js';
import type { Caller, LifecycleDeps } from './deps.js';
import { findKey, notFound } from './find-key.js';
import { parseInput, rotateKeyInput } from './inputs.js';
import { LifecycleError } from './lifecycle-error.js';

/**
 * `{graceSeconds}` → a new secret for the same key id. Plan, quotas, counters and bans hang on the
 * id, so they carry over; the old secret keeps working until the grace ends (at once with 0).
 * Only one previous secret is kept: rotating again during a grace ends the older one's grace.
 */
export async function rotateKey(deps: LifecycleDeps, id: string, input: unknown, caller: Caller): Promise<CreatedKey> {
  const { graceSeconds } = parseInput(rotateKeyInput, input, caller.label);
  const current = await findKey(deps, id);
  if (current.status === 'revoked') throw new LifecycleError('key_revoked', `key ${id} is revoked; create a new key instead`);
  const { key } = newApiKey(id);
  const graceEndsAt = graceSeconds > 0 ? new Date(deps.now() + graceSeconds * 1000).toISOString() : undefined;
  const change = await deps.keys.rotate(id, hashApiKey(key), graceEndsAt);
  if (!change) throw notFound(id);
  const after = publicView(change.after);
  await audit(
    deps,
    caller,
    'key.rotate',
    id,
    {
      // The secrets themselves never reach the audit; only that one was replaced.
      secret: { before: 'replaced', after: 'new' },
      ...changesBetween(publicView(change.before), after),
    },
    change.after.owner,
  );
  return { record: after, key };
}
