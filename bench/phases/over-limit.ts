import { closedLoop } from '../closed-loop.js';
import { createKeyWithCli } from '../keys.js';
import type { Options } from '../options.js';
import { readRedisStats, resetRedisStats } from '../redis-stats.js';
import type { OverLimitResults } from '../report.js';
import { PATH, type Stack } from '../stack.js';
import { latencyStats, perRequest, say } from './common.js';

/**
 * A key over its limit (1 a minute, 1 a day) after one allowed request, in two parts:
 * - over the limit, one request at a time until banned: every refusal is counted in Redis (one
 *   round trip each, so the ban comes at `ban.afterRejections` on any number of replicas, docs/clients.md
 *   "Bans"), so this costs afterRejections commands in all, however fast the client sends;
 * - banned, hammered by every connection: answered from the gateway's local ban cache, about 0
 *   Redis commands per request.
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
  let refusals = 0;
  for (let code = ''; code !== 'api_key_banned'; refusals++) {
    if (refusals === 10_000) throw new Error('over-limit key: not banned after 10000 refusals');
    const res = await fetch(url, { headers });
    code = ((await res.json()) as { code: string }).code;
  }
  const untilBanned = await readRedisStats(stack.admin);
  say(`  until banned: ${refusals} refusals (the last one the ban), Redis commands sent ${JSON.stringify(untilBanned.commands)}`);

  await resetRedisStats(stack.admin);
  const run = await closedLoop({ url, headers, connections: options.connections, durationSeconds: seconds });
  const counts = await readRedisStats(stack.admin);
  stack.truncateLogs();
  say(
    `  banned: ${run.requestsPerSecond.toFixed(0)} req/s, statuses ${JSON.stringify(run.statusCounts)}, Redis commands sent ${JSON.stringify(counts.commands)}`,
  );
  return {
    untilBanned: { refusals, totalCommands: untilBanned.totalCommands, commandsByName: untilBanned.commands },
    requestsPerSecond: run.requestsPerSecond,
    statusCounts: run.statusCounts,
    latency: latencyStats(run.latency),
    errors: run.errors + run.timeouts,
    redis: { ...perRequest(counts, run.sent), totalCommands: counts.totalCommands, commandsByName: counts.commands },
  };
}
