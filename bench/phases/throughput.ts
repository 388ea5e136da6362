import { closedLoop, type LoadResult } from '../closed-loop.js';
import { CpuMeter } from '../cpu.js';
import type { Options } from '../options.js';
import { addCounts, NO_COUNTS, readRedisStats, resetRedisStats, type RedisCounts } from '../redis-stats.js';
import type { Side, ThroughputResults } from '../report.js';
import { median, Samples } from '../samples.js';
import { PATH, type Stack, type Target } from '../stack.js';
import { latencyStats, perRequest, say } from './common.js';

/**
 * Maximum throughput: the same closed-loop load on every target, a warmup each, then rounds that
 * alternate between them (bare first), so a machine that slows down or speeds up during the run
 * affects every side alike. Redis counters are reset before each round of a target that uses
 * Redis and read after.
 */
export async function throughputPhase(stack: Stack, options: Options): Promise<ThroughputResults> {
  const targets = stack.targets();
  const load = (target: Target, durationSeconds: number) => ({
    url: target.url + PATH,
    headers: stack.headers,
    connections: options.connections,
    durationSeconds,
  });
  say(`\nthroughput: warmup ${options.warmupSeconds} s each, then ${options.rounds} × ${options.durationSeconds} s per side, alternating`);
  for (const target of targets) await closedLoop(load(target, options.warmupSeconds));
  stack.truncateLogs();

  const runs = new Map<string, { loads: LoadResult[]; cpuMs: Record<string, number>[]; redis: RedisCounts }>();
  for (const target of targets) runs.set(target.name, { loads: [], cpuMs: [], redis: NO_COUNTS });
  const width = Math.max(...targets.map((t) => t.name.length));
  for (let round = 1; round <= options.rounds; round++) {
    for (const target of targets) {
      const side = runs.get(target.name)!;
      if (target.usesRedis) await resetRedisStats(stack.admin);
      const meter = new CpuMeter({ proxy: target.process.pid, backend: stack.backendPid, redis: stack.redis.pid, loadgen: process.pid });
      const run = await closedLoop(load(target, options.durationSeconds));
      side.cpuMs.push(meter.read());
      side.loads.push(run);
      if (target.usesRedis) side.redis = addCounts(side.redis, await readRedisStats(stack.admin));
      stack.truncateLogs();
      say(
        `  round ${round} ${target.name.padEnd(width)} ${run.requestsPerSecond.toFixed(0).padStart(6)} req/s  p50 ${run.latency.quantile(0.5).toFixed(2)} ms  p99 ${run.latency.quantile(0.99).toFixed(2)} ms  non-2xx ${run.non2xx}  errors ${run.errors + run.timeouts}`,
      );
    }
  }

  const sides: Side[] = targets.map((target) => {
    const { loads, cpuMs, redis } = runs.get(target.name)!;
    const all = new Samples();
    for (const run of loads) all.addAll(run.latency);
    const requests = loads.reduce((n, r) => n + r.requests, 0);
    const cpuUsPerRequest: Record<string, number> = {};
    for (const name of Object.keys(cpuMs[0] ?? {})) cpuUsPerRequest[name] = (1000 * cpuMs.reduce((s, c) => s + c[name]!, 0)) / requests;
    return {
      name: target.name,
      kind: target.kind,
      requestsPerSecond: loads.reduce((s, r) => s + r.requestsPerSecond, 0) / loads.length,
      roundsRequestsPerSecond: loads.map((r) => r.requestsPerSecond),
      roundRatios: [],
      requests,
      latency: latencyStats(all),
      non2xx: loads.reduce((n, r) => n + r.non2xx, 0),
      errors: loads.reduce((n, r) => n + r.errors + r.timeouts, 0),
      cpuUsPerRequest,
      // Per request sent: in-flight requests at the end of a round reached Redis too.
      redis: target.usesRedis
        ? perRequest(
            redis,
            loads.reduce((n, r) => n + r.sent, 0),
          )
        : undefined,
    };
  });
  compare(sides);
  return { sides };
}

/**
 * Ratios to the bare proxy and to the best peer, round by round (each against the same round's
 * figure) and of the means. Round-by-round ratios are steadier when the machine's load varies.
 */
function compare(sides: Side[]): void {
  const bare = sides.find((s) => s.kind === 'bare');
  const peers = sides.filter((s) => s.kind === 'peer');
  const rounds = sides[0]?.roundsRequestsPerSecond.length ?? 0;
  const bestPeerRounds = Array.from({ length: rounds }, (_, i) => Math.max(...peers.map((p) => p.roundsRequestsPerSecond[i]!)));
  const bestPeer = peers.length ? Math.max(...peers.map((p) => p.requestsPerSecond)) : undefined;
  for (const side of sides) {
    if (bare) {
      side.roundRatios = side.roundsRequestsPerSecond.map((x, i) => x / bare.roundsRequestsPerSecond[i]!);
      side.ratioToBare = side.requestsPerSecond / bare.requestsPerSecond;
      side.medianRoundRatio = median(side.roundRatios);
    }
    if (bestPeer !== undefined) {
      side.ratioToBestPeer = side.requestsPerSecond / bestPeer;
      side.medianRoundRatioToBestPeer = median(side.roundsRequestsPerSecond.map((x, i) => x / bestPeerRounds[i]!));
    }
  }
}
