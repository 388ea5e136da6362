import { execFileSync } from 'node:child_process';
import { cpus } from 'node:os';
import { CpuMeter } from '../cpu.js';
import type { Options } from '../options.js';
import { addCounts, NO_COUNTS, readRedisStats, resetRedisStats, type RedisCounts } from '../redis-stats.js';
import type { Side, ThroughputResults } from '../report.js';
import { median } from '../samples.js';
import { PATH, type Stack, type Target, type Upstream } from '../stack.js';
import { hasTaskset, requireWrk, runWrk, type WrkResult } from '../wrk.js';
import { perRequest, say } from './common.js';

interface Round {
  load: WrkResult;
  cpuMs: Record<string, number>;
  /** Connections the upstream accepted during the round: the ones this target opened. */
  upstreamConnections: number;
}

/** Where wrk and the proxy under test run (--pin), and how the report says so. */
interface CpuPlan {
  wrk?: string;
  proxy?: string;
  description: string;
}

function cpuPlan(options: Options): CpuPlan {
  const n = cpus().length;
  const threads = `wrk -t${options.wrkThreads} -c${options.connections}`;
  if (options.pin === 'none') return { description: `${threads}, nothing pinned (--pin none)` };
  if (n < 2) return { description: `${threads}, nothing pinned (1 CPU)` };
  if (!hasTaskset()) return { description: `${threads}, nothing pinned (no taskset)` };
  const wrk = String(n - 1);
  if (options.pin === 'loadgen') return { wrk, description: `${threads} pinned to CPU ${wrk}; the proxies, upstreams and Redis unpinned` };
  const proxy = n === 2 ? '0' : `0-${n - 2}`;
  return {
    wrk,
    proxy,
    description: `${threads} pinned to CPU ${wrk}, the proxy under test (all its threads) to CPU ${proxy}; upstream and Redis unpinned`,
  };
}

/** Pins every thread of a process to `cpuList`; returns a function that restores its previous affinity. */
function pin(pid: number, cpuList: string): () => void {
  const before = /mask:\s*([0-9a-f]+)/i.exec(execFileSync('taskset', ['-p', String(pid)], { encoding: 'utf8' }))?.[1];
  execFileSync('taskset', ['-a', '-p', '-c', cpuList, String(pid)], { stdio: 'ignore' });
  return () => {
    if (before) execFileSync('taskset', ['-a', '-p', before, String(pid)], { stdio: 'ignore' });
  };
}

/**
 * Maximum throughput, in front of each upstream of the run (--upstreams: the plain Node upstream
 * and the bundled backend): the same closed-loop wrk load on every target, a warmup each, then
 * rounds that alternate between every target of every upstream (bare first), so a machine that
 * slows down or speeds up during the run affects every side alike. Per round and target: the
 * requests/s, the CPU of the proxy, the upstream, Redis and wrk, the connections the upstream
 * accepted (how many the proxy opened), and the Redis commands (counters reset before the round
 * of a target that uses Redis and read after).
 */
export async function throughputPhase(stack: Stack, options: Options): Promise<ThroughputResults> {
  requireWrk();
  const tables = stack
    .upstreams()
    .filter((u) => options.upstreams.includes(u.name))
    .map((upstream) => ({ upstream, targets: stack.targetsFor(upstream.name) }));
  const plan = cpuPlan(options);
  const load = (target: Target, durationSeconds: number) =>
    runWrk({
      url: target.url + PATH,
      headers: stack.headers,
      connections: options.connections,
      durationSeconds,
      threads: options.wrkThreads,
      cpus: plan.wrk,
    });
  say(
    `\nthroughput: ${plan.description}; in front of ${tables.map((t) => t.upstream.name).join(' and ')}; ` +
      `warmup ${options.warmupSeconds} s each, then ${options.rounds} × ${options.durationSeconds} s per side, alternating`,
  );

  const restore: Array<() => void> = [];
  const runs = new Map<Target, Round[]>();
  const redisOf = new Map<Target, RedisCounts>();
  try {
    if (plan.proxy) for (const { targets } of tables) for (const target of targets) restore.push(pin(target.process.pid, plan.proxy));
    for (const { targets } of tables) for (const target of targets) await load(target, options.warmupSeconds);
    stack.truncateLogs();
    const width = Math.max(...tables.flatMap((t) => t.targets.map((x) => x.name.length)));
    for (let round = 1; round <= options.rounds; round++) {
      for (const { upstream, targets } of tables) {
        for (const target of targets) {
          const measured = await measure(stack, upstream, target, () => load(target, options.durationSeconds));
          if (!runs.has(target)) runs.set(target, []);
          runs.get(target)!.push(measured.round);
          if (measured.redis) redisOf.set(target, addCounts(redisOf.get(target) ?? NO_COUNTS, measured.redis));
          stack.truncateLogs();
          const { load: run, cpuMs, upstreamConnections } = measured.round;
          say(
            `  round ${round} ${upstream.name.padEnd(7)} ${target.name.padEnd(width)} ${run.requestsPerSecond.toFixed(0).padStart(6)} req/s  ` +
              `CPU ${((1000 * cpuMs.proxy!) / run.requests).toFixed(0).padStart(4)} µs/req  upstream connections ${String(upstreamConnections).padStart(6)}  ` +
              `p50 ${run.latencyMs.p50.toFixed(2)} ms  p99 ${run.latencyMs.p99.toFixed(2)} ms  non-2xx ${run.non2xx}  errors ${run.errors}`,
          );
        }
      }
    }
  } finally {
    for (const undo of restore) undo();
  }

  const sidesOf = (targets: Target[]) => {
    const sides = targets.map((target) => side(target, runs.get(target) ?? [], redisOf.get(target)));
    compare(sides);
    return sides;
  };
  const bundled = tables.find((t) => t.upstream.name === 'bundled');
  const plain = tables.find((t) => t.upstream.name === 'plain');
  return {
    sides: bundled ? sidesOf(bundled.targets) : [],
    plainSides: plain ? sidesOf(plain.targets) : undefined,
    loadGenerator: plan.description,
  };
}

async function measure(
  stack: Stack,
  upstream: Upstream,
  target: Target,
  load: () => Promise<WrkResult>,
): Promise<{ round: Round; redis?: RedisCounts }> {
  if (target.usesRedis) await resetRedisStats(stack.admin);
  const connectionsBefore = await stack.upstreamConnections(upstream);
  const meter = new CpuMeter({ proxy: target.process.pid, upstream: upstream.process.pid, redis: stack.redis.pid });
  const run = await load();
  const cpuMs = { ...meter.read(), loadgen: run.cpuMs };
  const upstreamConnections = (await stack.upstreamConnections(upstream)) - connectionsBefore;
  const redis = target.usesRedis ? await readRedisStats(stack.admin) : undefined;
  return { round: { load: run, cpuMs, upstreamConnections }, redis };
}

function side(target: Target, rounds: Round[], redis: RedisCounts | undefined): Side {
  const loads = rounds.map((r) => r.load);
  const requests = loads.reduce((n, r) => n + r.requests, 0);
  const cpuUsPerRequest: Record<string, number> = {};
  for (const name of Object.keys(rounds[0]?.cpuMs ?? {}))
    cpuUsPerRequest[name] = (1000 * rounds.reduce((s, r) => s + r.cpuMs[name]!, 0)) / requests;
  const connections = rounds.map((r) => r.upstreamConnections);
  return {
    name: target.name,
    kind: target.kind,
    upstream: target.upstream,
    requestsPerSecond: loads.reduce((s, r) => s + r.requestsPerSecond, 0) / loads.length,
    medianRequestsPerSecond: median(loads.map((r) => r.requestsPerSecond)),
    roundsRequestsPerSecond: loads.map((r) => r.requestsPerSecond),
    roundRatios: [],
    requests,
    // wrk reports percentiles per run: the median of the rounds' (the max of their maxima).
    latency: {
      p50Ms: median(loads.map((r) => r.latencyMs.p50)),
      p90Ms: median(loads.map((r) => r.latencyMs.p90)),
      p99Ms: median(loads.map((r) => r.latencyMs.p99)),
      maxMs: Math.max(...loads.map((r) => r.latencyMs.max)),
      count: requests,
    },
    non2xx: loads.reduce((n, r) => n + r.non2xx, 0),
    errors: loads.reduce((n, r) => n + r.errors, 0),
    cpuUsPerRequest,
    upstreamConnectionsPerRound: connections,
    upstreamConnectionsPerRequest: connections.reduce((a, b) => a + b, 0) / requests,
    // Per request sent: in-flight requests at the end of a round reached Redis too.
    redis: redis
      ? perRequest(
          redis,
          loads.reduce((n, r) => n + r.sent, 0),
        )
      : undefined,
  };
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
