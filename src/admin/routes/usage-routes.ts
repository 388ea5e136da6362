import { LifecycleError } from '../../keys/lifecycle/lifecycle-error.js';
import type { KeyStore } from '../../store/key-store.js';
import { formatUsage, parseUsageQuery, USAGE_CONTENT_TYPES, usageRows, UsageQueryError } from '../../quota/usage-export.js';
import type { AdminDeps, AdminRoute } from '../admin-route.js';

const PARAMETERS = new Set(['from', 'to', 'by', 'format', 'consumer', 'owner']);

/**
 * GET /usage: usage for invoicing, the rows of `tollgate usage export` (quota/usage-export.ts),
 * streamed. `owner` keeps the consumers of one owner (an owner-scoped principal's is pinned to
 * its own, access/authorize.ts): `owner:<name>` subjects and the keys whose record names it; JWT
 * and anonymous consumers belong to no owner.
 */
export function usageRoutes({ usage, lifecycle }: AdminDeps): AdminRoute[] {
  if (!usage) return [];
  return [
    {
      method: 'GET',
      path: '/usage',
      action: 'usage.read',
      handle: async (r) => {
        for (const name of Object.keys(r.query))
          if (!PARAMETERS.has(name)) throw new LifecycleError('invalid_query', `unknown query parameter ${name}`);
        let query;
        try {
          query = parseUsageQuery(r.query, usage.timeZone);
        } catch (err) {
          if (err instanceof UsageQueryError) throw new LifecycleError('invalid_query', err.message);
          throw err;
        }
        const owner = r.query.owner;
        const include = owner === undefined ? undefined : (consumer: string) => ownedBy(lifecycle.keys, consumer, owner);
        const rows = usageRows(usage.reader.days(query.fromMs, query.toMs, query.consumer), query, include);
        return {
          status: 200,
          body: null,
          stream: { contentType: USAGE_CONTENT_TYPES[query.format], chunks: formatUsage(rows, query.format) },
        };
      },
    },
  ];
}

/** Whether a usage subject is `owner`'s: its shared windows, or one of its keys (revoked ones too, while their record is kept). */
async function ownedBy(keys: KeyStore, consumer: string, owner: string): Promise<boolean> {
  if (consumer.startsWith('owner:')) return consumer === `owner:${owner}`;
  if (consumer.includes(':')) return false;
  return (await keys.get(consumer))?.owner === owner;
}
