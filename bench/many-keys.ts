import { createKeysInBulk } from './keys.js';
import { rawGet } from './raw-load.js';
import type { BenchResults, Target as TargetRow } from './report.js';
import { PATH, type Stack, type Target } from './stack.js';

/**
 * The latency phase's many-keys rows: `tollgate` and `tollgate-leases` called at
 * the same fixed rate as every other row, but with a different key on each request, round robin
 * over --many-keys keys (10,000 by default; records written straight into Redis, ./keys.ts): a few
 * requests a minute per key, never hot: a warm key's lease for those that fill a block before their
 * minute ends (docs/quota-leases.md), Redis decisions for the rest. Beside the one-key rows of the same
 * targets in the same rounds, they show what many warm keys cost: latency percentiles and Redis
 * commands per request. Warm: an API's customers who call every few seconds keep their key
 * records cached (refreshed ahead of their ttlSeconds), so each round of a many-keys row begins
 * with a pass over every key (`warmupMs`, unmeasured); without it the other rows' rounds between
 * would leave every record expired, and the row would measure a cache miss per request instead.
 */
export const MANY_KEYS_TARGETS = ['tollgate', 'tollgate-leases', 'tollgate-no-leases'];

export interface LatencyRow {
  name: string;
  target: Target;
  /** Request i of a round. */
  request: (i: number) => Buffer;
  /** The least warmup: long enough for every key to be sent once (before each round, too: see above). */
  warmupMs: number;
}

/**
 * The rows of the run: one per target, and one more per many-keys target when `count` > 0; each
 * --compare/--variant build (`builds`, by name) gets one too, so the cold-key path is judged A/B.
 */
export async function latencyRows(
  stack: Stack,
  targets: Target[],
  count: number,
  ratePerSecond: number,
  builds: readonly string[] = [],
): Promise<LatencyRow[]> {
  const rows: LatencyRow[] = targets.map((target) => {
    const request = rawGet(target.url + PATH, stack.headersOf(target));
    return { name: target.name, target, request: () => request, warmupMs: 0 };
  });
  const many = targets.filter((t) => MANY_KEYS_TARGETS.includes(t.name) || builds.includes(t.name));
  if (count === 0 || many.length === 0) return rows;
  const keys = await createKeysInBulk(stack.admin, count, 'enterprise');
  for (const target of many) {
    const requests = keys.map((key) => rawGet(target.url + PATH, { authorization: `Bearer ${key}` }));
    rows.push({
      name: manyKeysName(target.name, count),
      target,
      request: (i) => requests[i % requests.length]!,
      warmupMs: Math.ceil((1000 * count) / ratePerSecond) + 1000,
    });
  }
  return rows;
}

const manyKeysName = (target: string, count: number) => `${target}, ${count.toLocaleString('en-US')} keys round robin`;

/** What many warm keys may add to p99 at half load over the bare proxy's. */
export const MANY_KEYS_ADDED_P99_MS = 3;

/** The targets-table rows: each many-keys row beside its one-key row, its p99 judged against bare's. */
export function manyKeysTargets(r: BenchResults): TargetRow[] {
  const sides = r.latency?.sides ?? [];
  const count = Number(r.options.manyKeys ?? 0);
  const rows: TargetRow[] = [];
  for (const name of MANY_KEYS_TARGETS) {
    const one = sides.find((s) => s.name === name);
    const many = sides.find((s) => s.name === manyKeysName(name, count));
    if (!one || !many) continue;
    const ms = (s: typeof one) => `${s.latency.p50Ms.toFixed(3)} / ${s.latency.p90Ms.toFixed(3)} / ${s.latency.p99Ms.toFixed(3)} ms`;
    const redis = (s: typeof one) => (s.redisCommandsPerRequest ?? NaN).toFixed(3);
    const added = many.addedP99Ms;
    rows.push({
      issue: 42,
      what: `${name}: ${count.toLocaleString('en-US')} warm keys round robin vs one key, at ${Math.round(r.latency!.ratePerSecond)} req/s: p99 over bare's`,
      target: `≤ +${MANY_KEYS_ADDED_P99_MS} ms`,
      measured: `${added === undefined ? 'no bare row' : `${added >= 0 ? '+' : ''}${added.toFixed(3)} ms`}; p50/p90/p99 ${ms(many)} vs ${ms(one)}; Redis commands/request ${redis(many)} vs ${redis(one)}`,
      met: added === undefined ? null : added <= MANY_KEYS_ADDED_P99_MS,
    });
  }
  return rows;
}
