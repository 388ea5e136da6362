import type { Quota } from '../config/plans-schema.js';
import type { Consumer } from '../auth/consumer.js';

/**
 * Whose windows and ban a request counts against: the key's own, or under a `scope: owner` plan
 * its owner's, shared by all of that owner's keys (a key without an owner keeps its own). Key ids
 * are 12 characters of [0-9a-z] and JWT consumers' ids start with `jwt:`, so `owner:…` can never be one. The stores key their state by it
 * (Redis: `tg:quota:{owner:acme}`, one hash tag, so one Cluster slot per decision).
 */
export function quotaSubject(key: Consumer, quota: Quota): string {
  return quota.scope === 'owner' && key.owner ? `owner:${key.owner}` : key.id;
}
