import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { CACHE_TARGET, cacheNote, cacheTargets } from './cache-target.js';
import { exactnessTable, exactnessTargets } from './exactness-report.js';
import { manyKeysTargets } from './many-keys.js';
import { manyKeysWrkTargets } from './many-keys-wrk.js';
import type { ExactnessResults } from './phases/exactness.js';
import { POST_TARGET_NAMES, postNote, postTargets } from './post-targets.js';
import type { ProfileDiff, ProfileSummary } from './profile-summary.js';
import type { TargetKind } from './stack.js';
import type { UpstreamName } from './targets.js';
import { TRANSPORT_LABELS, type Transport } from './transports.js';
import { median } from './samples.js';

export interface LatencyStats {
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
  count: number;
}

export interface RedisPerRequest {
  requests: number;
  /** Calls of each command the gateway sent, per request. */
  commands: Record<string, number>;
  /** Commands sent per request: each one a request waits for, in turn (its round trips). */
  commandsPerRequest: number;
  /** Commands run inside the quota script, per request (no round trip of their own). */
  scripted: Record<string, number>;
  /** Socket reads Redis processed per request: how many batches the commands came in. */
  readsPerRequest: number;
}

export interface Side {
  name: string;
  kind: TargetKind;
  /** What it forwarded to (absent in results from before issue 21: the bundled backend). */
  upstream?: UpstreamName;
  /** What the load spoke (--transport; absent in results from before issue 23: plain HTTP/1.1). */
  transport?: Transport;
  /** TLS and HTTP/2 sides: the median of the round-by-round ratios to the same target over plain HTTP/1.1. */
  medianRoundRatioToHttp?: number;
  /** Mean over the measured rounds. */
  requestsPerSecond: number;
  /** Median over the measured rounds. */
  medianRequestsPerSecond?: number;
  roundsRequestsPerSecond: number[];
  /** Round by round, this side's requests/s over the bare proxy's in the same round. */
  roundRatios: number[];
  ratioToBare?: number;
  /** The median of `roundRatios`: steadier than the ratio of means when the machine's load varies. */
  medianRoundRatio?: number;
  /** Over the better of the peer gateways (means), and the median of the same ratio round by round. */
  ratioToBestPeer?: number;
  medianRoundRatioToBestPeer?: number;
  requests: number;
  latency: LatencyStats;
  non2xx: number;
  errors: number;
  /**
   * CPU microseconds per request of each process: proxy (this side's), upstream, redis, loadgen
   * (wrk; `backend` instead of `upstream` in results from before issue 21).
   */
  cpuUsPerRequest: Record<string, number>;
  /** Round by round, the TCP connections the upstream accepted: the ones this proxy opened. */
  upstreamConnectionsPerRound?: number[];
  upstreamConnectionsPerRequest?: number;
  /** Round by round, the requests the upstream received, and their sum per request sent (below 1 behind a cache). */
  upstreamRequestsPerRound?: number[];
  upstreamRequestsPerRequest?: number;
  /** `tollgate-3-targets`: requests each target of its service got over the measured rounds (tries, from /metrics). */
  spreadPerTarget?: number[];
  /** A tollgate side: the share of its quota decisions in the measured rounds that a lease answered (from /metrics). */
  leasedShare?: number;
  redis?: RedisPerRequest;
}

export interface ThroughputResults {
  /** In front of the bundled backend, in round order: bare, the peers, tollgate builds. */
  sides: Side[];
  /** The same targets in front of the plain Node upstream (http.createServer, defaults). */
  plainSides?: Side[];
  /** With --transport tls or h2: every table of the run, by upstream and transport (plain HTTP's too). */
  transports?: Array<{ upstream: UpstreamName; transport: Transport; sides: Side[] }>;
  /** The load generator, and which CPUs it and the proxies ran on. */
  loadGenerator?: string;
}

export interface LatencySide {
  name: string;
  kind: TargetKind;
  /** CPU time of the proxy process per request at this rate. */
  proxyCpuUsPerRequest: number;
  /** From the moment the request was written. */
  latency: LatencyStats;
  /** From the moment it was due (includes any wait for a free connection in the generator). */
  latencyFromDue: LatencyStats;
  non2xx: number;
  errors: number;
  queued: number;
  addedP50Ms?: number;
  addedP99Ms?: number;
  /** Targets on Redis: commands the gateway sent (INFO commandstats, before and after) and Redis's CPU, per request. */
  redisCommandsPerRequest?: number;
  redisCpuUsPerRequest?: number;
}

export interface LatencyResults {
  ratePerSecond: number;
  sides: LatencySide[];
}

export interface OverLimitResults {
  /** One request at a time from the first refusal to the ban (the last refusal counted). */
  untilBanned: { refusals: number; totalCommands: number; commandsByName: Record<string, number> };
  /** The rest: the banned key hammered. */
  requestsPerSecond: number;
  statusCounts: Record<string, number>;
  latency: LatencyStats;
  errors: number;
  redis: RedisPerRequest & { totalCommands: number; commandsByName: Record<string, number> };
}

export interface MemoryStep {
  distinctKeys: number;
  rssMiB: number;
  peakRssMiB: number;
  /** V8 heap in use and reserved, when the gateway exposes its process metrics. */
  heapUsedMiB?: number;
  heapTotalMiB?: number;
  requestsPerSecond: number;
  non2xx: number;
  statusCounts: Record<string, number>;
  errors: number;
}

export interface MemoryResults {
  /** keyCache.maxEntries of the gateway's config. */
  cacheMaxEntries: number;
  keyRecords: number;
  keyRecordsWriteSeconds: number;
  rssBeforeMiB: number;
  steps: MemoryStep[];
  redis: RedisPerRequest;
  redisUsedMemoryMiB: number;
}

export interface SoakSample {
  /** Since the soak's load began. */
  seconds: number;
  /** Requests sent so far. */
  requests: number;
  rssMiB: number;
  peakRssMiB: number;
  heapUsedMiB?: number;
  heapTotalMiB?: number;
  /** Taken before the warmup ended: not judged. */
  warmup: boolean;
}

/** The soak gateway's memory right after a forced full GC (process.memoryUsage()). */
export interface AfterGc {
  heapUsedMiB: number;
  externalMiB: number;
  rssMiB: number;
}

export interface SoakResults {
  minutes: number;
  ratePerSecond: number;
  /** Distinct keys sent, all of them every pass. */
  keys: number;
  /** keyCache.maxEntries of the gateway's config (also the assertion-token cache's bound). */
  cacheMaxEntries: number;
  keyRecordsWriteSeconds: number;
  /** A quarter of the run, and at least until every key had been sent once. */
  warmupSeconds: number;
  /** Seconds between samples. */
  sampleSeconds: number;
  samples: SoakSample[];
  /** RSS over the samples after warmup; absent when none came after it. */
  rss?: { meanMiB: number; minMiB: number; maxMiB: number; firstMiB: number; lastMiB: number; maxDeviation: number; flat: boolean };
  heapUsed?: { minMiB: number; maxMiB: number };
  requests: number;
  requestsPerSecond: number;
  statusCounts: Record<string, number>;
  non2xx: number;
  errors: number;
  /** Requests that found every connection busy (the gateway fell behind the rate). */
  queued: number;
  latency: LatencyStats;
  /**
   * Heap used after a full GC with one key cached (before the soak) and with `cachedKeys` more
   * (after it), and the difference per key: its key-cache entry and record, the quota derived from
   * the record, and its cached assertion token (the LRUs' per-slot arrays are allocated up front
   * for maxEntries, so they are in both figures).
   */
  perKey: { cachedKeys: number; before: AfterGc; after: AfterGc; heapBytesPerKey: number };
}

export interface ProfileResults {
  /** Throughput under the profiler, tollgate over bare. */
  ratio: number;
  files: Record<string, string>;
  /** Per side: CPU per request of the whole process and of its main thread, in µs. */
  cpuUsPerRequest: Record<string, { all: number; mainThread: number }>;
  summary: ProfileSummary;
  diff: ProfileDiff;
}

export interface BenchResults {
  date: string;
  machine: { cpus: number; model: string; node: string; loadAverageAtStart: number[]; loadAverageAtEnd?: number[] };
  options: Record<string, unknown>;
  durationSeconds: number;
  throughput?: ThroughputResults;
  latency?: LatencyResults;
  overLimit?: OverLimitResults;
  memory?: MemoryResults;
  profile?: ProfileResults;
  soak?: SoakResults;
  exactness?: ExactnessResults;
}

export interface Target {
  /** The issue that set it; '–' for targets the run was given without one. */
  issue?: number | '–';
  what: string;
  target: string;
  measured: string;
  /** null: not judged by this run. */
  met: boolean | null;
}

/** The soak's RSS after warmup must stay within this fraction of its mean (issue 14). */
export const SOAK_FLAT_WITHIN = 0.1;
const FLAT_PERCENT = SOAK_FLAT_WITHIN * 100;
const int = (n: number) => Math.round(n).toLocaleString('en-US');
const ms = (n: number, digits = 2) => `${n.toFixed(digits)} ms`;
const signed = (n: number, digits = 2) => `${n >= 0 ? '+' : '−'}${Math.abs(n).toFixed(digits)} ms`;
const per = (n: number) => n.toFixed(n < 0.01 && n > 0 ? 4 : 2);
const ratio = (n: number | undefined) => `${(n ?? NaN).toFixed(2)}×`;

function commandList(commands: Record<string, number>): string {
  const entries = Object.entries(commands).sort((a, b) => b[1] - a[1]);
  return entries.length ? entries.map(([name, n]) => `${name} ${per(n)}`).join(', ') : 'none';
}

const named = <T extends { name: string }>(sides: T[] | undefined, name: string) => sides?.find((s) => s.name === name);

/** Each target's share of a spread side's requests. */
function spreadShares(perTarget: number[]): number[] {
  const all = perTarget.reduce((a, b) => a + b, 0);
  return perTarget.map((n) => n / all);
}

/** The median over the rounds of `a`'s requests/s over `b`'s in the same round. */
function roundMedianRatio(a: Side, b: Side): number {
  return median(a.roundsRequestsPerSecond.map((x, i) => x / b.roundsRequestsPerSecond[i]!));
}

export function targets(r: BenchResults): Target[] {
  const list: Target[] = [];
  // Issue 21, in front of the plain Node upstream, judged on the median of the round ratios; for
  // every tollgate build of the run (--compare, --variant), this checkout's first (tollgate-3-targets
  // is judged below, as issue 22's).
  // The cached and POST targets measure something else than a proxied GET: judged below, on their own.
  const ownTargets = new Set<string>([CACHE_TARGET, ...POST_TARGET_NAMES]);
  for (const p of r.throughput?.plainSides?.filter((s) => s.kind === 'tollgate' && !s.spreadPerTarget && !ownTargets.has(s.name)) ?? []) {
    const who = p.name === 'tollgate' ? '' : ` (${p.name})`;
    const ratios = [
      { versus: 'bare proxy', median: p.medianRoundRatio, ofMeans: p.ratioToBare, wanted: 0.95, target: '≥ 0.95× (stretch 1.2×)' },
      { versus: 'the better Node peer', median: p.medianRoundRatioToBestPeer, ofMeans: p.ratioToBestPeer, wanted: 1.25, target: '≥ 1.25×' },
    ];
    for (const { versus, median, ofMeans, wanted, target } of ratios) {
      if (median === undefined) continue;
      list.push({
        issue: 21,
        what: `plain Node upstream: throughput vs ${versus}${who}`,
        target,
        measured: `${ratio(median)} round median (of means ${ratio(ofMeans)})`,
        met: median >= wanted,
      });
    }
    const opened = p.upstreamConnectionsPerRound;
    const clients = Number(r.options.connections);
    if (opened?.length) {
      list.push({
        issue: 21,
        what: `plain Node upstream: connections tollgate opened per round${who}`,
        target: `≤ 2 × client connections (${2 * clients})`,
        measured: `${opened.map(int).join(' / ')} (${per(p.upstreamConnectionsPerRequest ?? NaN)} per request)`,
        met: Math.max(...opened) <= 2 * clients,
      });
    }
  }
  for (const sides of [r.throughput?.plainSides, r.throughput?.sides]) {
    const spread = sides?.find((s) => s.spreadPerTarget);
    if (!spread?.spreadPerTarget) continue;
    const where = spread.upstream === 'plain' ? 'plain Node upstream' : 'bundled backend';
    const shares = spreadShares(spread.spreadPerTarget);
    list.push({
      issue: 22,
      what: `${where}: requests per target of a three-target service (round robin)`,
      target: 'each 1/3 ± 2 points',
      measured: shares.map((x) => `${(100 * x).toFixed(1)}%`).join(' / '),
      met: shares.every((x) => Math.abs(x - 1 / shares.length) <= 0.02),
    });
    const one = named(sides, 'tollgate');
    if (one) {
      list.push({
        issue: 22,
        what: `${where}: three targets vs one (tollgate), throughput`,
        target: 'shown (balancing cost)',
        measured: `${ratio(roundMedianRatio(spread, one))} round median`,
        met: null,
      });
    }
  }
  // Every other tollgate build of the run (--compare, --variant) against this checkout, table by
  // table: the A/B a change is judged by (issue 22 asks services to cost at most 3 %).
  for (const sides of [r.throughput?.plainSides, r.throughput?.sides]) {
    const one = named(sides, 'tollgate');
    if (!one) continue;
    const where = one.upstream === 'plain' ? 'plain Node upstream' : 'bundled backend';
    const builds = new Set(((r.options.variants ?? []) as Array<{ name: string }>).map((v) => v.name));
    for (const other of sides!.filter((s) => builds.has(s.name))) {
      const cpu = (s: Side) => (s.cpuUsPerRequest.proxy ?? NaN).toFixed(1);
      list.push({
        issue: 22,
        what: `${where}: throughput, this checkout vs ${other.name} (A/B)`,
        target: 'shown',
        measured: `${roundMedianRatio(one, other).toFixed(3)}× round median; proxy CPU ${cpu(one)} vs ${cpu(other)} µs/request`,
        met: null,
      });
    }
  }
  list.push(...cacheTargets(r), ...postTargets(r));
  const t = named(r.throughput?.sides, 'tollgate');
  if (t) {
    if (t.ratioToBestPeer !== undefined) {
      list.push({
        what: 'bundled backend: throughput vs the better Node peer',
        target: '≥ 1.10×',
        measured: `${ratio(t.ratioToBestPeer)} (round median ${ratio(t.medianRoundRatioToBestPeer)})`,
        met: t.ratioToBestPeer >= 1.1,
      });
    }
    if (t.ratioToBare !== undefined) {
      list.push({
        what: 'bundled backend: throughput vs bare proxy',
        target: '≥ 0.75× (stretch 0.90×)',
        measured: `${ratio(t.ratioToBare)} (round median ${ratio(t.medianRoundRatio)})`,
        met: t.ratioToBare >= 0.75,
      });
    }
    // A request awaits each command it sends in turn (a key read on a cache miss, then the quota
    // script), so the commands sent per request are its critical-path round trips.
    const roundTrips = t.redis?.commandsPerRequest ?? NaN;
    list.push({ what: 'Redis round trips per request (steady state)', target: '≤ 1', measured: per(roundTrips), met: roundTrips <= 1.005 });
  }
  const l = named(r.latency?.sides, 'tollgate');
  if (l && l.addedP99Ms !== undefined) {
    const rate = int(r.latency!.ratePerSecond);
    list.push({
      what: `p99 latency at ${rate} req/s over bare proxy's`,
      target: '≤ +2 ms',
      measured: signed(l.addedP99Ms, 3),
      met: l.addedP99Ms <= 2,
    });
  }
  list.push(...manyKeysTargets(r), ...exactnessTargets(r.exactness));
  const wrkKeys = Number(r.options.wrkKeys ?? 2000);
  list.push(
    ...manyKeysWrkTargets([...(r.throughput?.plainSides ?? []), ...(r.throughput?.sides ?? [])], wrkKeys).map((row) => ({
      issue: 42,
      ...row,
    })),
  );
  if (r.overLimit) {
    const c = r.overLimit.redis.commandsPerRequest;
    const measured = `${per(c)} (${r.overLimit.redis.totalCommands} in ${int(r.overLimit.redis.requests)})`;
    list.push({ what: 'Redis commands per request, banned key', target: '≈ 0', measured, met: c < 0.01 });
    const u = r.overLimit.untilBanned;
    list.push({
      what: 'Redis commands from the first refusal to the ban',
      target: '≤ ban.afterRejections',
      measured: `${u.totalCommands} for ${u.refusals} refusals`,
      met: u.totalCommands <= u.refusals,
    });
  }
  if (r.memory && r.memory.steps.length >= 2) {
    // Memory can only level off once the key cache is full; judged over the last step, past twice
    // its size. V8 collects the old generation lazily, so RSS rises in jumps: the peak RSS of the
    // last step against the previous one's says whether it still grows.
    const { steps, cacheMaxEntries } = r.memory;
    const last = steps[steps.length - 1]!;
    const previous = steps[steps.length - 2]!;
    if (last.distinctKeys >= 2 * cacheMaxEntries && previous.distinctKeys >= cacheMaxEntries) {
      const growth = last.peakRssMiB / previous.peakRssMiB - 1;
      list.push({
        what: `gateway peak RSS, ${int(previous.distinctKeys)} → ${int(last.distinctKeys)} distinct keys (cache full at ${int(cacheMaxEntries)})`,
        target: 'bounded (levels off)',
        measured: `${int(previous.peakRssMiB)} → ${int(last.peakRssMiB)} MiB (${growth >= 0 ? '+' : ''}${(growth * 100).toFixed(0)}%)`,
        met: growth <= 0.1,
      });
    } else {
      list.push({
        what: `gateway RSS after ${int(last.distinctKeys)} distinct keys`,
        target: 'bounded (needs --distinct ≥ 2 × keyCache.maxEntries to judge)',
        measured: `${int(last.rssMiB)} MiB`,
        met: null,
      });
    }
  }
  if (r.soak) {
    const { rss, perKey } = r.soak;
    list.push({
      what: `gateway RSS over a ${r.soak.minutes}-minute soak across ${int(r.soak.keys)} distinct keys, after ${int(r.soak.warmupSeconds)} s warmup`,
      target: `flat: within ±${FLAT_PERCENT}% of its mean`,
      measured: rss
        ? `${int(rss.minMiB)}–${int(rss.maxMiB)} MiB, mean ${int(rss.meanMiB)} (±${(rss.maxDeviation * 100).toFixed(1)}%)`
        : 'no sample after warmup',
      met: rss ? rss.flat : null,
    });
    list.push({
      what: `gateway heap per cached key (key cache + assertion token, ${int(perKey.cachedKeys)} keys, after full GCs)`,
      target: 'stated',
      measured: `${int(perKey.heapBytesPerKey)} bytes`,
      met: Number.isFinite(perKey.heapBytesPerKey) && perKey.heapBytesPerKey > 0,
    });
  }
  return list;
}

function table(header: string[], rows: string[][]): string {
  const align = `|${header.map((_, i) => (i === 0 ? '---' : '---:')).join('|')}|`;
  return [`| ${header.join(' | ')} |`, align, ...rows.map((row) => `| ${row.join(' | ')} |`)].join('\n');
}

const label = (s: { name: string; kind: TargetKind }) =>
  s.kind === 'bare'
    ? 'bare http-proxy-3 (ceiling)'
    : s.name === 'bare-undici'
      ? 'bare undici: pool.request + pipe, no policy'
      : s.name === 'naive'
        ? 'naive: http-proxy-3 + rate-limiter-flexible'
        : s.name === 'fastify'
          ? 'Fastify: @fastify/http-proxy + rate-limit'
          : s.name;

const UPSTREAM_LABELS: Record<UpstreamName, string> = {
  plain: 'plain Node upstream (http.createServer, defaults: Keep-Alive timeout=5)',
  bundled: 'bundled backend (timeout=65)',
};

/** One table per upstream: req/s and ratios as medians over the alternating rounds. */
function throughputTable(r: BenchResults, sides: Side[], upstream: UpstreamName): string {
  const rounds = sides[0]?.roundsRequestsPerSecond.length ?? 0;
  const bareCpu = sides.find((s) => s.kind === 'bare')?.cpuUsPerRequest.proxy;
  const cpu = (s: Side, name: string) => int(s.cpuUsPerRequest[name] ?? NaN);
  return (
    table(
      [
        `GET /v1/categories → ${UPSTREAM_LABELS[upstream]}; ${r.options.connections} connections, ${rounds} × ${r.options.durationSeconds} s each, alternating`,
        'req/s (median)',
        '× bare (median of rounds)',
        '× best peer (median of rounds)',
        'proxy CPU µs/request (× bare)',
        'upstream / wrk CPU µs/request',
        'upstream connections opened, per round',
        'p50 / p99',
        'errors / non-2xx',
      ],
      sides.map((s) => [
        s.kind === 'tollgate' ? `**${label(s)}**` : label(s),
        int(s.medianRequestsPerSecond ?? s.requestsPerSecond),
        s.kind === 'bare' || s.medianRoundRatio === undefined ? '' : ratio(s.medianRoundRatio),
        s.kind !== 'tollgate' || s.medianRoundRatioToBestPeer === undefined ? '' : `**${ratio(s.medianRoundRatioToBestPeer)}**`,
        `${cpu(s, 'proxy')}${s.kind === 'bare' || bareCpu === undefined ? '' : ` (${ratio((s.cpuUsPerRequest.proxy ?? NaN) / bareCpu)})`}`,
        `${cpu(s, s.cpuUsPerRequest.upstream === undefined ? 'backend' : 'upstream')} / ${cpu(s, 'loadgen')}`,
        s.upstreamConnectionsPerRound ? s.upstreamConnectionsPerRound.map(int).join(' / ') : '',
        `${ms(s.latency.p50Ms)} / ${ms(s.latency.p99Ms)}`,
        `${s.errors} / ${s.non2xx}`,
      ]),
    ) +
    spreadNote(sides) +
    cacheNote(sides) +
    postNote(sides)
  );
}

/** Under a table with `tollgate-3-targets`: where its requests went (its connections column counts the first target's only). */
function spreadNote(sides: Side[]): string {
  const spread = sides.find((s) => s.spreadPerTarget);
  if (!spread?.spreadPerTarget) return '';
  const shares = spreadShares(spread.spreadPerTarget);
  const each = spread.spreadPerTarget.map((n, i) => `${int(n)} (${(100 * shares[i]!).toFixed(1)}%)`).join(' / ');
  return (
    `\n\n${spread.name}: one service of three instances of this upstream, round robin; requests per target over the rounds ${each}. ` +
    'Its upstream CPU and connections columns count the first instance only.'
  );
}

/**
 * --transport: every transport side by side, one table per upstream; each ratio against the bare
 * proxy on the same transport (and the same certificate), and against the same target over plain
 * HTTP/1.1, both medians of the round-by-round ratios.
 */
function transportTable(r: BenchResults, upstream: UpstreamName): string {
  const tables = r.throughput!.transports!.filter((t) => t.upstream === upstream);
  const rounds = tables[0]?.sides[0]?.roundsRequestsPerSecond.length ?? 0;
  const cpu = (s: Side, name: string) => int(s.cpuUsPerRequest[name] ?? NaN);
  const rows = tables.flatMap(({ transport, sides }) => {
    const bareCpu = sides.find((s) => s.kind === 'bare')?.cpuUsPerRequest.proxy;
    return sides.map((s) => [
      s.kind === 'tollgate' ? `**${label(s)}**` : label(s),
      TRANSPORT_LABELS[transport],
      int(s.medianRequestsPerSecond ?? s.requestsPerSecond),
      s.kind === 'bare' || s.medianRoundRatio === undefined
        ? ''
        : s.kind === 'tollgate'
          ? `**${ratio(s.medianRoundRatio)}**`
          : ratio(s.medianRoundRatio),
      s.medianRoundRatioToHttp === undefined ? '' : ratio(s.medianRoundRatioToHttp),
      `${cpu(s, 'proxy')}${s.kind === 'bare' || bareCpu === undefined ? '' : ` (${ratio((s.cpuUsPerRequest.proxy ?? NaN) / bareCpu)})`}`,
      `${cpu(s, 'upstream')} / ${cpu(s, 'loadgen')}`,
      `${ms(s.latency.p50Ms)} / ${ms(s.latency.p99Ms)}`,
      `${s.errors} / ${s.non2xx}`,
    ]);
  });
  return table(
    [
      `GET /v1/categories → ${UPSTREAM_LABELS[upstream]}; ${r.options.connections} connections, ${rounds} × ${r.options.durationSeconds} s each, alternating`,
      'transport',
      'req/s (median)',
      '× bare, same transport (median of rounds)',
      '× itself over HTTP/1.1 (median of rounds)',
      'proxy CPU µs/request (× bare)',
      'upstream / load generator CPU µs/request',
      'p50 / p99',
      'errors / non-2xx',
    ],
    rows,
  );
}

function latencyTable(r: BenchResults): string {
  const { sides, ratePerSecond } = r.latency!;
  const why = r.options.rate === undefined ? "half tollgate's maximum" : 'fixed with --rate';
  return table(
    [
      `fixed rate ${int(ratePerSecond)} req/s (${why}), open loop, ${r.options.latencyRounds} × ${r.options.latencySeconds} s each`,
      'p50 (added)',
      'p90',
      'p99 (added)',
      'CPU µs/request',
      'Redis commands/request',
      'Redis CPU µs/request',
      'errors / non-2xx',
    ],
    sides.map((s) => [
      label(s),
      `${ms(s.latency.p50Ms, 3)}${s.addedP50Ms === undefined || s.kind === 'bare' ? '' : ` (${signed(s.addedP50Ms, 3)})`}`,
      ms(s.latency.p90Ms, 3),
      `${ms(s.latency.p99Ms, 3)}${s.addedP99Ms === undefined || s.kind === 'bare' ? '' : ` (**${signed(s.addedP99Ms, 3)}**)`}`,
      int(s.proxyCpuUsPerRequest),
      s.redisCommandsPerRequest === undefined ? '–' : s.redisCommandsPerRequest.toFixed(3),
      s.redisCpuUsPerRequest === undefined ? '–' : s.redisCpuUsPerRequest.toFixed(1),
      `${s.errors} / ${s.non2xx}`,
    ]),
  );
}

function redisTable(r: BenchResults): string | undefined {
  const rows: string[][] = [];
  const t = named(r.throughput?.sides, 'tollgate')?.redis;
  if (t)
    rows.push([
      'steady state, one key (throughput rounds)',
      per(t.commandsPerRequest),
      commandList(t.commands),
      commandList(t.scripted),
      per(t.readsPerRequest),
    ]);
  if (r.overLimit) {
    const o = r.overLimit.redis;
    const calls =
      Object.entries(o.commandsByName)
        .map(([name, n]) => `${name} ×${n}`)
        .join(', ') || 'none';
    const scripted =
      Object.entries(o.scripted)
        .map(([name, n]) => `${name} ×${Math.round(n * o.requests)}`)
        .join(', ') || 'none';
    const u = r.overLimit.untilBanned;
    const untilCalls =
      Object.entries(u.commandsByName)
        .map(([name, n]) => `${name} ×${n}`)
        .join(', ') || 'none';
    rows.push([
      `over-limit key, one at a time until banned (429s)`,
      per(u.totalCommands / u.refusals),
      `${untilCalls} in ${int(u.refusals)} requests`,
      '',
      '',
    ]);
    rows.push([
      `banned key, hammered (429s)`,
      per(o.commandsPerRequest),
      `${calls} in ${int(o.requests)} requests`,
      scripted,
      per(o.readsPerRequest),
    ]);
  }
  if (r.memory) {
    const m = r.memory.redis;
    rows.push([
      'a new key every request (memory run: key cache misses)',
      per(m.commandsPerRequest),
      commandList(m.commands),
      commandList(m.scripted),
      per(m.readsPerRequest),
    ]);
  }
  if (rows.length === 0) return undefined;
  return table(
    ['Redis, per tollgate request', 'commands sent (= round trips)', 'by command', 'run inside the script', 'socket reads by Redis'],
    rows,
  );
}

function memoryTable(r: BenchResults): string {
  const m = r.memory!;
  return table(
    [
      `gateway memory, ${int(m.keyRecords)} keys in Redis, key cache max ${int(m.cacheMaxEntries)}`,
      'RSS',
      'peak RSS',
      'JS heap used / total',
      'req/s',
    ],
    [
      ['before', `${int(m.rssBeforeMiB)} MiB`, '', '', ''],
      ...m.steps.map((s) => [
        `after ${int(s.distinctKeys)} distinct keys`,
        `${int(s.rssMiB)} MiB`,
        `${int(s.peakRssMiB)} MiB`,
        s.heapUsedMiB === undefined ? '' : `${int(s.heapUsedMiB)} / ${int(s.heapTotalMiB ?? NaN)} MiB`,
        int(s.requestsPerSecond),
      ]),
    ],
  );
}

function soakTable(r: BenchResults): string {
  const s = r.soak!;
  const mib = (n: number | undefined) => (n === undefined ? '' : `${int(n)} MiB`);
  const judged = s.samples.filter((x) => !x.warmup);
  const at = (x: SoakSample | undefined) => (x ? `${int(x.seconds)} s` : '');
  const rows: string[][] = [
    ['one key cached, after a full GC', mib(s.perKey.before.rssMiB), `${s.perKey.before.heapUsedMiB.toFixed(1)} MiB`],
  ];
  if (s.rss) {
    const heap = s.heapUsed ? `${int(s.heapUsed.minMiB)}–${int(s.heapUsed.maxMiB)} MiB` : '';
    rows.push(
      [`after warmup: first sample (${at(judged[0])})`, mib(s.rss.firstMiB), mib(judged[0]?.heapUsedMiB)],
      [
        `after warmup: min / mean / max (${judged.length} samples)`,
        `${int(s.rss.minMiB)} / ${int(s.rss.meanMiB)} / ${int(s.rss.maxMiB)} MiB`,
        heap,
      ],
      [`after warmup: last sample (${at(judged[judged.length - 1])})`, mib(s.rss.lastMiB), mib(judged[judged.length - 1]?.heapUsedMiB)],
      [
        `flat (every sample within ±${FLAT_PERCENT}% of the mean)`,
        `${s.rss.flat ? 'yes' : '**no**'} (±${(s.rss.maxDeviation * 100).toFixed(1)}%)`,
        '',
      ],
    );
  } else rows.push(['after warmup', 'no sample: run longer or faster', '']);
  rows.push(
    [
      `${int(s.perKey.cachedKeys)} more keys cached, after a full GC`,
      mib(s.perKey.after.rssMiB),
      `${s.perKey.after.heapUsedMiB.toFixed(1)} MiB`,
    ],
    ['**heap per cached key** (difference / keys)', '', `**${int(s.perKey.heapBytesPerKey)} bytes**`],
  );
  const load =
    `${int(s.requests)} requests at ${int(s.requestsPerSecond)} req/s, p50 / p99 ${ms(s.latency.p50Ms)} / ${ms(s.latency.p99Ms)}, ` +
    `statuses ${JSON.stringify(s.statusCounts)}, errors ${s.errors}, queued ${int(s.queued)}`;
  return `${table(
    [
      `gateway soak: ${s.minutes} min at ${int(s.ratePerSecond)} req/s (open loop) over ${int(s.keys)} distinct keys, each pass in a new random order, key cache max ${int(s.cacheMaxEntries)}`,
      'RSS',
      'JS heap used',
    ],
    rows,
  )}

${load}. RSS every ${s.sampleSeconds} s (MiB, warmup in brackets): ${soakSeries(s)}`;
}

function soakSeries(s: SoakResults): string {
  return s.samples.map((x) => (x.warmup ? `(${int(x.rssMiB)})` : int(x.rssMiB))).join(' ');
}

export function markdownReport(r: BenchResults): string {
  const load = r.machine.loadAverageAtStart.map((x) => x.toFixed(1)).join(', ');
  const parts: string[] = [
    `Measured ${r.date.slice(0, 10)} on ${r.machine.cpus} CPUs (${r.machine.model}), Node ${r.machine.node}, load average at start ${load}; ` +
      'load generator, gateway, upstream and Redis share the machine, so only the ratios carry over to another machine.',
  ];
  if (r.throughput?.loadGenerator) parts.push(`Throughput load: ${r.throughput.loadGenerator}.`);
  if (r.throughput?.plainSides) parts.push(throughputTable(r, r.throughput.plainSides, 'plain'));
  if (r.throughput?.sides.length) parts.push(throughputTable(r, r.throughput.sides, 'bundled'));
  for (const upstream of new Set(r.throughput?.transports?.map((t) => t.upstream))) parts.push(transportTable(r, upstream));
  if (r.latency) parts.push(latencyTable(r));
  const redis = redisTable(r);
  if (redis) parts.push(redis);
  if (r.memory) parts.push(memoryTable(r));
  if (r.soak) parts.push(soakTable(r));
  if (r.exactness) parts.push(exactnessTable(r.exactness));
  const t = targets(r);
  if (t.length)
    parts.push(
      table(
        ['target', 'issue', 'wanted', 'measured', 'met'],
        t.map((x) => [x.what, String(x.issue ?? 14), x.target, x.measured, x.met === null ? 'n/a' : x.met ? 'yes' : '**no**']),
      ),
    );
  return `${parts.join('\n\n')}\n`;
}

export function textReport(r: BenchResults): string {
  const lines = ['targets:'];
  for (const x of targets(r))
    lines.push(`  ${x.met === null ? 'n/a    ' : x.met ? 'met    ' : 'NOT MET'}  ${x.what}: ${x.measured} (wanted ${x.target})`);
  const t = named(r.throughput?.sides, 'tollgate')?.redis;
  if (t) {
    lines.push(
      `Redis: ${per(t.commandsPerRequest)} commands sent per request (${commandList(t.commands)}), Redis did ${per(t.readsPerRequest)} socket reads per request. ` +
        'With auto-pipelining, commands of concurrent requests share one write, so Redis reads fewer batches than commands; ' +
        'each request still waits for one reply per command it sends, in turn: its critical-path round trips. ' +
        `Commands run inside the quota script (${commandList(t.scripted)}) are counted by Redis but cost no round trip.`,
    );
  }
  if (r.soak) {
    const s = r.soak;
    lines.push(
      `soak: gateway RSS (MiB, warmup in brackets): ${soakSeries(s)}; ${int(s.requests)} requests, statuses ${JSON.stringify(s.statusCounts)}, errors ${s.errors}. ` +
        `Heap per cached key: ${int(s.perKey.heapBytesPerKey)} bytes (heap used after a full GC, ${s.perKey.before.heapUsedMiB.toFixed(1)} MiB with one key cached, ` +
        `${s.perKey.after.heapUsedMiB.toFixed(1)} MiB with ${int(s.perKey.cachedKeys)} more; key cache entry, record, derived quota and assertion token).`,
    );
  }
  return lines.join('\n');
}

// `node --import tsx bench/report.ts bench-results/latest.json`: the Markdown again, e.g. for the README.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const file = process.argv[2];
  if (!file) {
    process.stderr.write('usage: node --import tsx bench/report.ts RESULTS.json\n');
    process.exit(2);
  }
  const results = JSON.parse(readFileSync(file, 'utf8')) as BenchResults;
  process.stdout.write(`${textReport(results)}\n\n${markdownReport(results)}`);
}
