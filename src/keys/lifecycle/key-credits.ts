import { z } from 'zod';
import { quotaFor } from '../../quota/quota-for.js';
import { quotaSubject } from '../../quota/quota-subject.js';
import { audit } from './audit-changes.js';
import type { Caller, LifecycleDeps } from './deps.js';
import { findKey } from './find-key.js';
import { parseInput } from './inputs.js';
import { LifecycleError } from './lifecycle-error.js';
import type { KeyRecord } from '../record.js';

/** A key's prepaid credits: the balance, whose it is (the key's, or its owner's), and whether its plan spends it. */
export interface CreditsReport {
  id: string;
  /** The quota subject holding the balance: the key id, or `owner:…` under a `scope: owner` plan. */
  subject: string;
  credits: number;
  /** Whether the key's plan has `credits: required` (else the balance is kept but not spent). */
  required: boolean;
}

/** Largest balance or change: whole numbers a Lua double and JSON carry exactly. */
const MAX_CREDITS = 1e15;
const MAX_REASON = 200;

const amount = (min: number) =>
  z
    .number({ error: 'must be a whole number' })
    .int('must be a whole number')
    .min(min, `must be at least ${min}`)
    .max(MAX_CREDITS, `must be at most ${MAX_CREDITS}`);

/** One operator change: `add` (may be negative) or `set`, with the reason the audit keeps. */
const changeSchema = z.strictObject({
  add: amount(-MAX_CREDITS).optional(),
  set: amount(0).optional(),
  reason: z
    .string({ error: 'is required: why the balance changes' })
    .trim()
    .min(1, 'is required: why the balance changes')
    .max(MAX_REASON, `must be at most ${MAX_REASON} characters`),
});

export async function keyCredits(deps: LifecycleDeps, id: string): Promise<CreditsReport> {
  const record = await findKey(deps, id);
  const { subject, required } = creditsOf(deps, record);
  const { after } = await deps.quotas.changeCredits(subject, {});
  return { id, subject, credits: after, required };
}

/**
 * Changes the balance atomically beside the windows (never below zero: refused whole), drops any
 * verdict cached for the subject on every replica, and audits it with the actor and the reason.
 */
export async function changeKeyCredits(deps: LifecycleDeps, id: string, input: unknown, caller: Caller): Promise<CreditsReport> {
  const change = parseInput(changeSchema, input, caller.label);
  if ((change.add === undefined) === (change.set === undefined))
    throw new LifecycleError('invalid_body', `give exactly one of ${caller.label('add')} or ${caller.label('set')}`);
  const record = await findKey(deps, id);
  const { subject, required } = creditsOf(deps, record);
  const result = await deps.quotas.changeCredits(subject, change.set !== undefined ? { set: change.set } : { add: change.add });
  if (!result.applied)
    throw new LifecycleError(
      'credits_below_zero',
      `the balance is ${result.before}: adding ${change.add} would take it below zero; nothing changed`,
    );
  await deps.keys.announce(subject); // every replica drops what it cached of the subject
  if (subject !== id) await deps.keys.announce(id);
  await audit(deps, caller, 'key.credits', id, { credits: { before: result.before, after: result.after } }, record.owner, change.reason);
  return { id, subject, credits: result.after, required };
}

/** Under a `scope: owner` plan the balance is the owner's, shared by all of its keys (as the windows are). */
function creditsOf(deps: LifecycleDeps, record: KeyRecord): { subject: string; required: boolean } {
  const quota = quotaFor(record, deps.plans());
  return { subject: quota ? quotaSubject(record, quota) : record.id, required: quota?.credits === 'required' };
}
