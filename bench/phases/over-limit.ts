import { closedLoop } from '../closed-loop.js';
import { createKeyWithCli } from '../keys.js';
import type { Options } from '../options.js';
import { readRedisStats, resetRedisStats } from '../redis-stats.js';
import type { OverLimitResults } from '../report.js';
import { PATH, type Stack } from '../stack.js';
import { latencyStats, perRequest, say } from './common.js';

/**
 * A key over its limit (1 a minute, 1 a day) after one allowed request. The first refusal comes
 * from Redis, and so do those of the requests already on their way to Redis when it arrives (at
 * most one per connection); later ones come from the gateway's local verdict cache, with the
 * rejections reported to Redis in batches (so the key gets banned, after which nothing is
 * reported). Redis commands per request should be about 0.
 */
export async function overLimitPhase(stack: Stack, options: Options): Promise<OverLimitResults> {
  const seconds = Math.min(5, options.durationSeconds);
  say(`\nover-limit key: --per-minute 1 --per-day 1, one allowed request, then ${options.connections} connections for ${seconds} s`);
  const { key } = await createKeyWithCli(stack.redis.url, ['--plan', 'free', '--per-minute', '1', '--per-day', '1']);
  const headers = { authorization: `Bearer ${key}` };
  const url = stack.tollgate.url + PATH;
  const first = await fetch(url, { headers });
  await first.arrayBuffer();
  if (first.status !== 200) throw new Error(`over-limit key: the first request got ${first.status}, expected 200`);
  await resetRedisStats(stack.admin);
  const run = await closedLoop({ url, headers, connections: options.connections, durationSeconds: seconds });
  const counts = await readRedisStats(stack.admin);
  stack.truncateLogs();
  say(`  ${run.requestsPerSecond.toFixed(0)} req/s, statuses ${JSON.stringify(run.statusCounts)}, Redis commands sent ${JSON.stringify(counts.commands)}`);
  return {
    requestsPerSecond: run.requestsPerSecond,
    statusCounts: run.statusCounts,
    latency: latencyStats(run.latency),
    errors: run.errors + run.timeouts,
    redis: { ...perRequest(counts, run.sent), totalCommands: counts.totalCommands, commandsByName: counts.commands },
  };
}
