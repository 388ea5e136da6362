import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { closedLoop } from '../closed-loop.js';
import { CpuMeter } from '../cpu.js';
import type { Options } from '../options.js';
import type { NodeProcess } from '../../test/harness/node-process.js';
import { workDir } from '../processes.js';
import { aggregate, diff, formatDiff, formatSummary, summarise, type Aggregate, type CpuProfile } from '../profile-summary.js';
import type { ProfileResults } from '../report.js';
import { POLICY_TARGET, policyConfig } from '../policy-target.js';
import { QUOTA_VARIANT_NAMES, quotaVariantConfig, type QuotaVariant } from '../quota-variants.js';
import { PATH, type Stack } from '../stack.js';
import { MANY_KEYS_WRK_TARGET } from '../many-keys-wrk.js';
import { say } from './common.js';

interface Profiled {
  name: string;
  aggregate: Aggregate;
  /** Requests in the aggregated window, scaled so that per-request figures are main-thread CPU. */
  requests: number;
  requestsPerSecond: number;
  cpuUsPerRequest: number;
  mainThreadCpuUsPerRequest: number;
  file: string;
}

/**
 * The bare proxy, the gateway and any variants, each a process of its own under `node --cpu-prof`,
 * loaded one after the other like the throughput rounds, then stopped (the profile is written at
 * exit). Only the samples taken during the measured load count (not startup, warmup or shutdown).
 * A sampled interval includes time the process waited for a CPU (the machine is shared), so each
 * profile's busy time is scaled to the CPU time its main thread really used (from /proc).
 */
export async function profilePhase(stack: Stack, options: Options): Promise<ProfileResults> {
  const seconds = Math.max(options.durationSeconds, 10);
  // The bundled backend, unless --upstreams names only the plain Node upstream.
  const only = options.upstreams.length === 1 ? options.upstreams[0] : 'bundled';
  const upstream = stack.upstreams().find((u) => u.name === only)!;
  const sides: Side[] = [
    { name: 'bare', start: (a) => stack.startBare('bare-profiled', a, upstream.url), listening: 'bare proxy' },
    { name: 'tollgate', start: (a) => stack.startGateway('gateway-profiled', a, undefined, undefined, upstream.url), listening: 'gateway' },
    ...options.variants.map((v) => ({
      name: v.name,
      start: (a: string[]) => stack.startGateway(`${v.name}-profiled`, a, v.cli, undefined, upstream.url),
      listening: 'gateway',
    })),
    // With tollgate-policies in --targets: what a configured no-op policy adds, function by function.
    ...(options.targets.includes(POLICY_TARGET)
      ? [
          {
            name: POLICY_TARGET,
            start: (a: string[]) =>
              stack.startGateway(`${POLICY_TARGET}-profiled`, a, undefined, policyConfig(`${POLICY_TARGET}-profiled`), upstream.url),
            listening: 'gateway',
          },
        ]
      : []),
    // The quota variants in --targets (quota-variants.ts), in its order: what a quota feature adds.
    ...quotaVariantsIn(options.targets).map((name) => ({
      name,
      start: (a: string[]) => stack.startGateway(`${name}-profiled`, a, undefined, quotaVariantConfig(name), upstream.url),
      listening: 'gateway',
    })),
    // With tollgate-2000-keys in --targets: the shipped gateway called with another key on every
    // request, round robin (none hot; warm keys' leases): what many warm keys add, read beside
    // tollgate-no-leases (one key, no lease) when that is profiled too.
    ...(options.targets.includes(MANY_KEYS_WRK_TARGET)
      ? [
          {
            name: MANY_KEYS_WRK_TARGET,
            start: (a: string[]) => stack.startGateway(`${MANY_KEYS_WRK_TARGET}-profiled`, a, undefined, undefined, upstream.url),
            listening: 'gateway',
            authorizations: (await stack.manyKeysOf(options)).map((key) => `Bearer ${key}`),
          },
        ]
      : []),
  ];
  say(
    `\nprofile: ${sides.map((s) => s.name).join(', ')}, one after the other under node --cpu-prof in front of the ${upstream.name} upstream, ${options.connections} connections for ${seconds} s after ${options.warmupSeconds} s warmup`,
  );
  mkdirSync(options.outDir, { recursive: true });
  const profiled: Profiled[] = [];
  for (const side of sides) profiled.push(await profileOne(side, stack, options, seconds));

  const [bare, tollgate, ...variants] = profiled as [Profiled, Profiled, ...Profiled[]];
  const summary = summarise(tollgate.aggregate, 30);
  const d = diff(tollgate.aggregate, tollgate.requests, bare.aggregate, bare.requests, 30);
  let text = `gateway:\n${formatSummary(summary)}\n\n${formatDiff(d)}`;
  // A quota variant is read beside the first one in --targets (tollgate-limits beside tollgate-no-leases), the first beside tollgate.
  const quotaVariants = quotaVariantsIn(variants.map((v) => v.name));
  const baseline = variants.find((v) => v.name === quotaVariants[0]);
  const noLeases = variants.find((v) => v.name === 'tollgate-no-leases');
  for (const variant of variants) {
    const against =
      variant.name === MANY_KEYS_WRK_TARGET
        ? (noLeases ?? tollgate)
        : baseline && baseline !== variant && (quotaVariants as string[]).includes(variant.name)
          ? baseline
          : tollgate;
    const v = diff(variant.aggregate, variant.requests, against.aggregate, against.requests, 30);
    text += `\n\nvariant ${variant.name} against ${against.name} (negative: saved):\n${formatDiff(v, variant.name, against.name)}`;
  }
  writeFileSync(join(options.outDir, 'profile.txt'), `${text}\n`);
  say(`\n${text}`);
  return {
    ratio: tollgate.requestsPerSecond / bare.requestsPerSecond,
    files: Object.fromEntries(profiled.map((p) => [p.name, p.file])),
    cpuUsPerRequest: Object.fromEntries(profiled.map((p) => [p.name, { all: p.cpuUsPerRequest, mainThread: p.mainThreadCpuUsPerRequest }])),
    summary,
    diff: d,
  };
}

/** The quota variants among `names`, in their order. */
function quotaVariantsIn(names: readonly string[]): QuotaVariant[] {
  return names.filter((name): name is QuotaVariant => (QUOTA_VARIANT_NAMES as string[]).includes(name));
}

interface Side {
  name: string;
  start: (execArgv: string[]) => NodeProcess;
  listening: string;
  /** Authorization values sent in turn, instead of the run's one key (closed-loop.ts). */
  authorizations?: string[];
}

async function profileOne(side: Side, stack: Stack, options: Options, seconds: number): Promise<Profiled> {
  const dir = join(workDir(), `profile-${side.name}`);
  mkdirSync(dir, { recursive: true });
  const proc = side.start(['--cpu-prof', '--cpu-prof-dir', dir]);
  const url = await proc.listening(side.listening);
  const load = { url: url + PATH, headers: stack.headers, connections: options.connections, rotateAuthorizations: side.authorizations };
  await closedLoop({ ...load, durationSeconds: options.warmupSeconds });
  const loadStartMs = Date.now();
  const all = new CpuMeter({ proxy: proc.pid });
  const main = new CpuMeter({ proxy: proc.pid }, true);
  const run = await closedLoop({ ...load, durationSeconds: seconds });
  const cpuMs = all.read().proxy!;
  const mainCpuMs = main.read().proxy!;
  const loadEndMs = Date.now();
  await stack.stop(proc);
  const exitMs = Date.now();

  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
  if (!file) throw new Error(`the profiled ${side.name} wrote no .cpuprofile`);
  const text = readFileSync(join(dir, file), 'utf8');
  const kept = join(options.outDir, `${side.name}.cpuprofile`);
  writeFileSync(kept, text);
  const profile = JSON.parse(text) as CpuProfile;
  // The profile ends at exit, and writing it delays the exit we see: the window is placed back
  // from the end and trimmed by a second at each side, to stay inside the load.
  const fromUs = profile.endTime - (exitMs - loadStartMs - 1000) * 1000;
  const toUs = profile.endTime - (exitMs - loadEndMs + 1000) * 1000;
  const agg = aggregate(profile, { fromUs, toUs });
  // How much of the sampled busy time the main thread really ran (the rest it waited for a CPU).
  const loadSeconds = (loadEndMs - loadStartMs) / 1000;
  const windowSeconds = agg.wallUs / 1e6;
  const running = Math.min(1, (mainCpuMs * 1000 * (windowSeconds / loadSeconds)) / (agg.wallUs - agg.idleUs));
  const perRequest = (ms: number) => (1000 * ms) / (run.requestsPerSecond * loadSeconds);
  say(
    `  ${side.name}: ${run.requestsPerSecond.toFixed(0)} req/s under the profiler; CPU per request ${perRequest(cpuMs).toFixed(0)} µs (main thread ${perRequest(mainCpuMs).toFixed(0)} µs); ${kept}`,
  );
  return {
    name: side.name,
    aggregate: agg,
    requests: (run.requestsPerSecond * windowSeconds) / running,
    requestsPerSecond: run.requestsPerSecond,
    cpuUsPerRequest: perRequest(cpuMs),
    mainThreadCpuUsPerRequest: perRequest(mainCpuMs),
    file: kept,
  };
}
