import { createKeysInBulk } from './keys.js';
import { rawGet } from './raw-load.js';
import type { BenchResults, Target as TargetRow } from './report.js';
import { PATH, type Stack, type Target } from './stack.js';

/**
 * The latency phase's many-keys rows: `tollgate` and `tollgate-leases` called at
 * the same fixed rate as every other row, but with a different key on each request, round robin
 * over --many-keys keys (10,000 by default; records written straight into Redis, ./keys.ts), so
 * each key is cold: a few requests a minute, never hot enough for a lease. Beside the one-key rows
 * of the same targets in the same rounds, they show what a cold key costs: latency percentiles and
 * Redis commands per request. The warmup sends every key once, but the other rows' rounds come
 * between it and a many-keys round, so by then the key cache's records (ttlSeconds, 30) have
 * expired: each request is a cache miss (one HGETALL) and a quota script call, 2 commands.
 */
export const MANY_KEYS_TARGETS = ['tollgate', 'tollgate-leases', 'tollgate-no-leases'];

export interface LatencyRow {
  name: string;
  target: Target;
  /** Request i of a round. */
  request: (i: number) => Buffer;
  /** The least warmup: long enough for every key to be sent once. */
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

/** The targets-table rows: each many-keys row beside its one-key row (shown, not judged). */
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
    rows.push({
      issue: '–',
      what: `${name}: ${count.toLocaleString('en-US')} cold keys round robin vs one key, at ${Math.round(r.latency!.ratePerSecond)} req/s`,
      target: 'shown: cold keys pay nothing new',
      measured: `p50/p90/p99 ${ms(many)} vs ${ms(one)}; Redis commands/request ${redis(many)} vs ${redis(one)}`,
      met: null,
    });
  }
  return rows;
}
