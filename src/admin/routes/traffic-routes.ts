import type { LifecycleDeps } from '../../keys/lifecycle/deps.js';
import { keyUsage } from '../../keys/lifecycle/key-usage.js';
import { LifecycleError } from '../../keys/lifecycle/lifecycle-error.js';
import { DECISIONS } from '../../observability/traffic.js';
import type { AdminDeps, AdminRoute } from '../admin-route.js';

const DEFAULT_SECONDS = 300;
const DEFAULT_TOP = 10;
/** Minutes a key answered `banned` stays a candidate for GET /bans (the counters keep five). */
const BAN_MINUTES = 5;

/**
 * This replica's live traffic (the console's overview), from in-process counters
 * (observability/traffic.ts): requests per second by decision, top keys by requests and by
 * refusals, and the keys currently banned that this replica answered in the last minutes, each
 * confirmed against the quota store. Absent (404) where no counters are given (the CLI).
 */
export function trafficRoutes({ traffic, lifecycle }: AdminDeps): AdminRoute[] {
  if (!traffic) return [];
  return [
    {
      method: 'GET',
      path: '/traffic',
      action: 'traffic.read',
      handle: async (r) => {
        const seconds = boundedInt(r.query.seconds, 'seconds', 1, 300, DEFAULT_SECONDS);
        const top = boundedInt(r.query.top, 'top', 1, 100, DEFAULT_TOP);
        for (const name of Object.keys(r.query))
          if (name !== 'seconds' && name !== 'top') throw new LifecycleError('invalid_query', `unknown query parameter ${name}`);
        return {
          status: 200,
          body: { decisions: DECISIONS, seconds: traffic.series(seconds), topKeys: { minutes: 5, ...traffic.topKeys(5, top) } },
        };
      },
    },
    {
      method: 'GET',
      path: '/bans',
      action: 'bans.read',
      handle: async (r) => {
        const { owner, ...others } = r.query;
        if (Object.keys(others).length > 0) throw new LifecycleError('invalid_query', 'GET /bans takes only an owner');
        const reports = await Promise.all(
          (await ofOwner(lifecycle, traffic.bannedKeyIds(BAN_MINUTES), owner)).map((id) =>
            keyUsage(lifecycle, id).then(
              (usage) => usage,
              () => null, // revoked since, or its plan gone: not a ban anyone can lift here
            ),
          ),
        );
        const bans = reports
          .filter((u) => u !== null && u.bannedUntil !== null)
          .map((u) => ({ id: u!.id, plan: u!.plan, bannedUntil: u!.bannedUntil! }));
        return { status: 200, body: { bans } };
      },
    },
  ];
}

/** The ids among `ids` whose key belongs to `owner` (all of them when no owner is asked for). */
async function ofOwner(lifecycle: LifecycleDeps, ids: string[], owner: string | undefined): Promise<string[]> {
  if (owner === undefined) return ids;
  const records = await Promise.all(ids.map((id) => lifecycle.keys.get(id)));
  return ids.filter((_, i) => records[i]?.owner === owner);
}

function boundedInt(value: string | undefined, name: string, min: number, max: number, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!/^\d{1,4}$/.test(value) || n < min || n > max)
    throw new LifecycleError('invalid_query', `${name} must be an integer from ${min} to ${max}`);
  return n;
}
