import { closedLoop } from '../closed-loop.js';
import { CpuMeter } from '../cpu.js';
import type { Options } from '../options.js';
import { latencyRows } from '../many-keys.js';
import { openLoop, type RawResult } from '../raw-load.js';
import type { LatencyResults, LatencySide } from '../report.js';
import { Samples } from '../samples.js';
import { PATH, type Stack } from '../stack.js';
import { latencyStats, say } from './common.js';
import { readRedisCpuMs, readRedisStats, resetRedisStats } from '../redis-stats.js';

/**
 * Latency below saturation: an open-loop load at half tollgate's own maximum (issue 14's target:
 * p99 there within 2 ms of the bare proxy's), the same schedule for every target, alternating
 * rounds. What a target adds is its p50/p99 minus the bare proxy's.
 */
export async function latencyPhase(stack: Stack, options: Options, tollgateMaxPerSecond?: number): Promise<LatencyResults> {
  const maxRate =
    options.rate === undefined
      ? (tollgateMaxPerSecond ??
        (
          await closedLoop({
            url: stack.tollgate.url + PATH,
            headers: stack.headers,
            connections: options.connections,
            durationSeconds: options.warmupSeconds,
          })
        ).requestsPerSecond)
      : 2 * options.rate;
  const rate = Math.max(50, Math.round(maxRate / 2));
  const builds = options.variants.map((variant) => variant.name);
  const rows = await latencyRows(stack, stack.targets(), options.manyKeys, rate, builds);
  const why = options.rate === undefined ? "half tollgate's maximum" : '--rate';
  say(
    `\nlatency at a fixed rate: ${rate} req/s (${why}), open loop, ${options.latencyRounds} × ${options.latencySeconds} s per side, alternating`,
  );
  // Warm each row at the rate first (JIT, connection pools, caches): a cold process queues. A
  // many-keys row sends each of its keys once at least (./many-keys.ts).
  const warmupMs = Math.min(3, options.warmupSeconds) * 1000;
  for (const row of rows) {
    await openLoop({
      url: row.target.url,
      request: row.request,
      ratePerSecond: rate,
      durationMs: Math.max(warmupMs, row.warmupMs),
      connections: options.connections,
    });
  }
  stack.truncateLogs();
  const collected = new Map(
    rows.map((t) => [
      t.name,
      { latency: new Samples(), fromDue: new Samples(), runs: [] as RawResult[], cpuMs: 0, redisCommands: 0, redisCpuMs: 0 },
    ]),
  );
  const width = Math.max(...rows.map((r) => r.name.length));
  for (let round = 1; round <= options.latencyRounds; round++) {
    for (const { name, target, request, warmupMs: rowWarmupMs } of rows) {
      const side = collected.get(name)!;
      // A many-keys row: every key once more, so the round measures warm keys (../many-keys.ts).
      if (rowWarmupMs > 0) {
        await openLoop({ url: target.url, request, ratePerSecond: rate, durationMs: rowWarmupMs, connections: options.connections });
        stack.truncateLogs();
      }
      const meter = new CpuMeter({ proxy: target.process.pid });
      if (target.usesRedis) await resetRedisStats(stack.admin);
      const redisCpuBeforeMs = target.usesRedis ? await readRedisCpuMs(stack.admin) : 0;
      const run = await openLoop({
        url: target.url,
        request,
        ratePerSecond: rate,
        durationMs: options.latencySeconds * 1000,
        connections: options.connections,
      });
      side.latency.addAll(run.latency);
      side.fromDue.addAll(run.latencyFromDue);
      side.runs.push(run);
      side.cpuMs += meter.read().proxy!;
      if (target.usesRedis) {
        side.redisCommands += (await readRedisStats(stack.admin)).totalCommands;
        side.redisCpuMs += (await readRedisCpuMs(stack.admin)) - redisCpuBeforeMs;
      }
      stack.truncateLogs();
      say(
        `  round ${round} ${name.padEnd(width)} ${((1000 * run.requests) / run.elapsedMs).toFixed(0).padStart(6)} req/s  p50 ${run.latency.quantile(0.5).toFixed(3)} ms  p99 ${run.latency.quantile(0.99).toFixed(3)} ms  CPU ${((1000 * meter.read().proxy!) / run.requests).toFixed(0)} µs/request  non-2xx ${run.non2xx}  errors ${run.errors}`,
      );
    }
  }
  const sides: LatencySide[] = rows.map(({ name, target }) => {
    const { latency, fromDue, runs, cpuMs, redisCommands, redisCpuMs } = collected.get(name)!;
    const requests = runs.reduce((n, r) => n + r.requests, 0);
    return {
      name,
      kind: target.kind,
      proxyCpuUsPerRequest: (1000 * cpuMs) / requests,
      ...(target.usesRedis && { redisCommandsPerRequest: redisCommands / requests, redisCpuUsPerRequest: (1000 * redisCpuMs) / requests }),
      latency: latencyStats(latency),
      latencyFromDue: latencyStats(fromDue),
      non2xx: runs.reduce((n, r) => n + r.non2xx, 0),
      errors: runs.reduce((n, r) => n + r.errors, 0),
      queued: runs.reduce((n, r) => n + r.queued, 0),
    };
  });
  const bare = sides.find((s) => s.kind === 'bare');
  for (const side of sides) {
    if (!bare) break;
    side.addedP50Ms = side.latency.p50Ms - bare.latency.p50Ms;
    side.addedP99Ms = side.latency.p99Ms - bare.latency.p99Ms;
  }
  return { ratePerSecond: rate, sides };
}
