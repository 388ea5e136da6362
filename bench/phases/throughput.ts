import { execFileSync, spawnSync } from 'node:child_process';
import { cpus } from 'node:os';
import { CpuMeter } from '../cpu.js';
import type { Options } from '../options.js';
import { decisionCounts, type DecisionCounts } from '../lease-share.js';
import { addCounts, NO_COUNTS, readRedisStats, resetRedisStats, type RedisCounts } from '../redis-stats.js';
import type { Side, ThroughputResults } from '../report.js';
import { median } from '../samples.js';
import { runH2load } from '../h2load.js';
import { triesPerTarget } from '../spread-target.js';
import { PATH, type Stack, type Target, type Upstream } from '../stack.js';
import type { Transport } from '../transports.js';
import { hasTaskset, requireWrk, runWrk, type WrkOptions, type WrkResult } from '../wrk.js';
import { perRequest, say } from './common.js';

interface Round {
  load: WrkResult;
  cpuMs: Record<string, number>;
  /** Connections the upstream accepted during the round: the ones this target opened. */
  upstreamConnections: number;
  /** Requests the upstream received during the round (fewer than the client's behind a cache). */
  upstreamRequests: number;
  /** `tollgate-3-targets`: the tries each of its service's targets got in the round. */
  spread?: number[];
  /** A tollgate target's quota decisions in the round, and how many of them a lease answered. */
  decisions?: DecisionCounts;
}

/** Where wrk and the proxy under test run (--pin), and how the report says so. */
interface CpuPlan {
  wrk?: string;
  proxy?: string;
  description: string;
}

function cpuPlan(options: Options): CpuPlan {
  const n = cpus().length;
  const h2 = options.transports.includes('h2') ? ` (h2: h2load -t${options.wrkThreads} -c${options.connections} -m1)` : '';
  const threads = `wrk -t${options.wrkThreads} -c${options.connections}${h2}`;
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
    // A process replaced by --restart has gone: nothing to give back.
    if (before) spawnSync('taskset', ['-a', '-p', before, String(pid)], { stdio: 'ignore' });
  };
}

/**
 * Maximum throughput, in front of each upstream of the run (--upstreams: the plain Node upstream
 * and the bundled backend): the same closed-loop wrk load on every target, a warmup each, then
 * rounds that alternate between every target of every upstream, so a machine that slows down or
 * speeds up during the run affects every side alike. Odd rounds go in order (bare first), even
 * rounds in reverse: a side that always ran right after another one (a process still flushing
 * its log, a pool whose idle connections expired while it waited) would otherwise carry that
 * place's bias in every round. With --restart, every tollgate build gets a new process before
 * each round after the first (options.ts says why). Per round and target: the requests/s, the CPU of the proxy, the upstream, Redis and wrk, the connections the upstream
 * accepted (how many the proxy opened), and the Redis commands (counters reset before the round
 * of a target that uses Redis and read after).
 */
export async function throughputPhase(stack: Stack, options: Options): Promise<ThroughputResults> {
  requireWrk();
  // One table per upstream and transport (--transport): plain HTTP to the run's targets, TLS and
  // HTTP/2 to their TLS twins (stack.ts), every round visiting all of them.
  const upstreams = stack.upstreams().filter((u) => options.upstreams.includes(u.name));
  const tables: Array<{ upstream: Upstream; transport: Transport; targets: Target[] }> = options.transports.flatMap((transport) =>
    upstreams.map((upstream) => ({
      upstream,
      transport,
      targets: transport === 'http' ? stack.targetsFor(upstream.name) : stack.tlsTargetsFor(upstream.name),
    })),
  );
  const plan = cpuPlan(options);
  const load = (transport: Transport, target: Target, durationSeconds: number) => {
    // A target rotating its keys sets Authorization per request (wrk's -H would send a second one).
    const credentials = target.rotateKeys ? {} : stack.headersOf(target);
    const run: WrkOptions = {
      url: target.url + PATH,
      headers: { ...credentials, ...target.request?.headers },
      rotateKeys: target.rotateKeys,
      method: target.request?.method,
      body: target.request?.body,
      connections: options.connections,
      durationSeconds,
      threads: options.wrkThreads,
      cpus: plan.wrk,
    };
    return transport === 'h2' ? runH2load(run) : runWrk(run);
  };
  const over = options.transports.length > 1 || options.transports[0] !== 'http' ? `, over ${options.transports.join(', ')}` : '';
  say(
    `\nthroughput: ${plan.description}; in front of ${upstreams.map((u) => u.name).join(' and ')}${over}; ` +
      `warmup ${options.warmupSeconds} s each, then ${options.rounds} × ${options.durationSeconds} s per side, alternating`,
  );

  const restore: Array<() => void> = [];
  // Keyed by table and target: a TLS twin serves two tables (tls and h2).
  const runs = new Map<string, Round[]>();
  const redisOf = new Map<string, RedisCounts>();
  const keyOf = (transport: Transport, target: Target) => `${transport} ${target.upstream} ${target.name}`;
  try {
    const pinned = new Set<Target>();
    for (const { targets } of tables) for (const target of targets) pinned.add(target);
    if (plan.proxy) for (const target of pinned) restore.push(pin(target.process.pid, plan.proxy));
    for (const { transport, targets } of tables) for (const target of targets) await load(transport, target, options.warmupSeconds);
    stack.truncateLogs();
    const width = Math.max(...tables.flatMap((t) => t.targets.map((x) => x.name.length)));
    for (let round = 1; round <= options.rounds; round++) {
      if (round > 1 && options.restart) {
        // The plain HTTP targets (TLS twins keep their process).
        for (const { transport, targets } of tables) {
          for (const target of targets.filter((t) => t.startAgain)) {
            await stack.restart(target);
            if (plan.proxy) restore.push(pin(target.process.pid, plan.proxy));
            await load(transport, target, options.warmupSeconds);
          }
        }
        stack.truncateLogs();
      }
      const inOrder = <T>(list: T[]) => (round % 2 === 1 ? list : [...list].reverse());
      for (const { upstream, transport, targets } of inOrder(tables)) {
        for (const target of inOrder(targets)) {
          const measured = await measure(stack, upstream, target, () => load(transport, target, options.durationSeconds));
          const key = keyOf(transport, target);
          if (!runs.has(key)) runs.set(key, []);
          runs.get(key)!.push(measured.round);
          if (measured.redis) redisOf.set(key, addCounts(redisOf.get(key) ?? NO_COUNTS, measured.redis));
          stack.truncateLogs();
          const { load: run, cpuMs, upstreamConnections, decisions } = measured.round;
          const leased = decisions?.all ? `  leased ${((100 * decisions.leased) / decisions.all).toFixed(0)}%` : '';
          say(
            `  round ${round} ${upstream.name.padEnd(7)} ${over ? `${transport.padEnd(4)} ` : ''}${target.name.padEnd(width)} ${run.requestsPerSecond.toFixed(0).padStart(6)} req/s  ` +
              `CPU ${((1000 * cpuMs.proxy!) / run.requests).toFixed(0).padStart(4)} µs/req  upstream connections ${String(upstreamConnections).padStart(6)}  ` +
              `p50 ${run.latencyMs.p50.toFixed(2)} ms  p99 ${run.latencyMs.p99.toFixed(2)} ms  non-2xx ${run.non2xx}  errors ${run.errors}${leased}`,
          );
        }
      }
    }
  } finally {
    for (const undo of restore) undo();
  }

  const sidesOf = (transport: Transport, targets: Target[]) => {
    const sides = targets.map((target) =>
      side(transport, target, runs.get(keyOf(transport, target)) ?? [], redisOf.get(keyOf(transport, target))),
    );
    compare(sides);
    return sides;
  };
  const all = tables.map(({ upstream, transport, targets }) => ({
    upstream: upstream.name,
    transport,
    sides: sidesOf(transport, targets),
  }));
  // Each TLS and HTTP/2 side against the same target over plain HTTP, round by round.
  for (const table of all) {
    const http = all.find((t) => t.transport === 'http' && t.upstream === table.upstream);
    for (const s of table.sides) {
      const plain = http?.sides.find((x) => x.name === s.name);
      if (table.transport === 'http' || !plain) continue;
      s.medianRoundRatioToHttp = median(s.roundsRequestsPerSecond.map((x, i) => x / plain.roundsRequestsPerSecond[i]!));
    }
  }
  const bundled = all.find((t) => t.transport === 'http' && t.upstream === 'bundled');
  const plain = all.find((t) => t.transport === 'http' && t.upstream === 'plain');
  return {
    sides: bundled?.sides ?? [],
    plainSides: plain?.sides,
    transports: options.transports.some((t) => t !== 'http') ? all : undefined,
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
  // The upstream process it forwards to: its own twin (tollgate-cache in front of plain) or the table's.
  const served = target.via ?? upstream;
  const before = await stack.upstreamCounts(served);
  const spreadOf = target.spreadUrls && target.adminUrl ? () => triesPerTarget(target.adminUrl!, target.spreadUrls!) : undefined;
  const spreadBefore = await spreadOf?.();
  const decisionsOf = target.kind === 'tollgate' && target.adminUrl ? () => decisionCounts([target.adminUrl]) : undefined;
  const decisionsBefore = await decisionsOf?.();
  const meter = new CpuMeter({ proxy: target.process.pid, upstream: served.process.pid, redis: stack.redis.pid });
  const run = await load();
  const cpuMs = { ...meter.read(), loadgen: run.cpuMs };
  const after = await stack.upstreamCounts(served);
  const upstreamConnections = after.accepted - before.accepted;
  const upstreamRequests = after.requests - before.requests;
  const spreadAfter = await spreadOf?.();
  const spread = spreadAfter?.map((n, i) => n - spreadBefore![i]!);
  const decisionsAfter = await decisionsOf?.();
  const decisions = decisionsAfter && {
    leased: decisionsAfter.leased - decisionsBefore!.leased,
    all: decisionsAfter.all - decisionsBefore!.all,
  };
  const redis = target.usesRedis ? await readRedisStats(stack.admin) : undefined;
  return { round: { load: run, cpuMs, upstreamConnections, upstreamRequests, spread, decisions }, redis };
}

function side(transport: Transport, target: Target, rounds: Round[], redis: RedisCounts | undefined): Side {
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
    transport,
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
    upstreamRequestsPerRound: rounds.map((r) => r.upstreamRequests),
    // Per request sent, like Redis's below.
    upstreamRequestsPerRequest: rounds.reduce((n, r) => n + r.upstreamRequests, 0) / loads.reduce((n, r) => n + r.sent, 0),
    spreadPerTarget: rounds[0]?.spread?.map((_, i) => rounds.reduce((n, r) => n + (r.spread?.[i] ?? 0), 0)),
    leasedShare: leasedShare(rounds.map((r) => r.decisions)),
    // Per request sent: in-flight requests at the end of a round reached Redis too.
    redis: redis
      ? perRequest(
          redis,
          loads.reduce((n, r) => n + r.sent, 0),
        )
      : undefined,
  };
}

/** The share of the rounds' quota decisions a lease answered; undefined without any counted. */
function leasedShare(rounds: Array<DecisionCounts | undefined>): number | undefined {
  const all = rounds.reduce((n, d) => n + (d?.all ?? 0), 0);
  return all > 0 ? rounds.reduce((n, d) => n + (d?.leased ?? 0), 0) / all : undefined;
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
