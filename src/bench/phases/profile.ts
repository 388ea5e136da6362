import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { closedLoop } from '../closed-loop.js';
import { CpuMeter } from '../cpu.js';
import type { Options } from '../options.js';
import { WORK_DIR } from '../processes.js';
import { aggregate, diff, formatDiff, formatSummary, summarise, type CpuProfile } from '../profile-summary.js';
import type { ProfileResults } from '../report.js';
import { PATH, type Stack } from '../stack.js';
import { say } from './common.js';

/**
 * A bare proxy and a gateway of their own under `node --cpu-prof`, loaded one after the other like
 * the throughput rounds, then stopped (the profile is written at exit). Only the samples taken
 * during the measured load count (not startup, warmup or shutdown). On a shared machine a sampled
 * interval includes time the process waited for a CPU, so each profile's busy time is scaled to
 * the CPU time the process really used (from /proc) before comparing per request.
 */
export async function profilePhase(stack: Stack, options: Options): Promise<ProfileResults> {
  const seconds = Math.max(options.durationSeconds, 10);
  say(`\nprofile: bare proxy, then gateway, each under node --cpu-prof, ${options.connections} connections for ${seconds} s after ${options.warmupSeconds} s warmup`);
  mkdirSync(options.outDir, { recursive: true });
  const sides = {} as Record<'bare' | 'tollgate', { requests: number; requestsPerSecond: number; file: string; aggregate: ReturnType<typeof aggregate> }>;
  for (const side of ['bare', 'tollgate'] as const) {
    const dir = join(WORK_DIR, `profile-${side}`);
    mkdirSync(dir, { recursive: true });
    const execArgv = ['--cpu-prof', '--cpu-prof-dir', dir];
    const proc = side === 'bare' ? stack.startBare('bare-profiled', execArgv) : stack.startGateway('gateway-profiled', execArgv);
    const url = await proc.listening(side === 'bare' ? 'bare proxy listening' : 'gateway listening');
    const load = { url: url + PATH, headers: stack.headers, connections: options.connections };
    await closedLoop({ ...load, durationSeconds: options.warmupSeconds });
    const loadStartMs = Date.now();
    const all = new CpuMeter({ proxy: proc.pid });
    const main = new CpuMeter({ proxy: proc.pid }, true);
    const run = await closedLoop({ ...load, durationSeconds: seconds });
    const cpuMs = all.read().proxy!;
    const mainCpuMs = main.read().proxy!;
    const loadEndMs = Date.now();
    await proc.stop();
    const exitMs = Date.now();
    const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
    if (!file) throw new Error(`the profiled ${side} wrote no .cpuprofile`);
    const text = readFileSync(join(dir, file), 'utf8');
    const kept = join(options.outDir, `${side === 'bare' ? 'bare-proxy' : 'gateway'}.cpuprofile`);
    writeFileSync(kept, text);
    const profile = JSON.parse(text) as CpuProfile;
    // The profile ends at exit, and writing it delays the exit we see: the window is placed back
    // from the end and trimmed by a second at each side, to stay inside the load.
    const fromUs = profile.endTime - (exitMs - loadStartMs - 1000) * 1000;
    const toUs = profile.endTime - (exitMs - loadEndMs + 1000) * 1000;
    const agg = aggregate(profile, { fromUs, toUs });
    // Requests in the window, and how much of the sampled busy time the main thread really ran
    // (the rest it waited for a CPU); per-request figures are then main-thread CPU microseconds.
    const loadSeconds = (loadEndMs - loadStartMs) / 1000;
    const windowSeconds = agg.wallUs / 1e6;
    const running = Math.min(1, (mainCpuMs * 1000 * (windowSeconds / loadSeconds)) / (agg.wallUs - agg.idleUs));
    const requests = run.requestsPerSecond * windowSeconds;
    sides[side] = { requests: requests / running, requestsPerSecond: run.requestsPerSecond, file: kept, aggregate: agg };
    const perRequest = (ms: number) => ((1000 * ms) / (run.requestsPerSecond * loadSeconds)).toFixed(0);
    say(`  ${side}: ${run.requestsPerSecond.toFixed(0)} req/s under the profiler; CPU per request ${perRequest(cpuMs)} µs (main thread ${perRequest(mainCpuMs)} µs); ${kept}`);
  }
  const summary = summarise(sides.tollgate.aggregate, 30);
  const d = diff(sides.tollgate.aggregate, sides.tollgate.requests, sides.bare.aggregate, sides.bare.requests, 30);
  const text = `gateway:\n${formatSummary(summary)}\n\n${formatDiff(d)}`;
  writeFileSync(join(options.outDir, 'profile.txt'), `${text}\n`);
  say(`\n${text}`);
  return {
    ratio: sides.tollgate.requestsPerSecond / sides.bare.requestsPerSecond,
    files: { gateway: sides.tollgate.file, bare: sides.bare.file },
    summary,
    diff: d,
  };
}
