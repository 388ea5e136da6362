// Summarises a V8 .cpuprofile (from `node --cpu-prof`): self time per function, self time per
// owner (tollgate's own files, each npm package, Node core modules, GC), and inclusive time of
// tollgate's own functions; and, given a second profile of the bare proxy under the same load,
// what tollgate adds per request. Usable alone:
//   node dist/bench/profile-summary.js GATEWAY.cpuprofile [BARE.cpuprofile] [--top N]
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

interface Entry {
  name: string;
  where: string;
  us: number;
}

/** Self and inclusive times of one profile (or of a time window of it), in microseconds. */
export interface Aggregate {
  wallUs: number;
  idleUs: number;
  byFunction: Map<string, Entry>;
  byOwner: Map<string, Entry>;
  /** Self time by tollgate concern (see CONCERNS). */
  byConcern: Map<string, Entry>;
  /** Self + callees of functions in tollgate's own compiled files (dist/), the benchmark's left out. */
  inclusiveOwn: Map<string, Entry>;
}

export interface Row {
  name: string;
  where: string;
  ms: number;
  /** Of the busy (non-idle) time. */
  percent: number;
}

export interface ProfileSummary {
  wallMs: number;
  busyMs: number;
  selfByFunction: Row[];
  selfByOwner: Row[];
  byConcern: Row[];
  inclusiveOwn: Row[];
}

/**
 * What a sample's time was spent for, from the innermost frame of its stack that belongs to one
 * of tollgate's concerns (a policy calling res.setHeader counts for that policy, ioredis parsing a
 * reply counts for Redis). Stacks with none of them are the HTTP server and proxy work that the
 * bare proxy does too.
 */
const CONCERNS: Array<[concern: string, url: RegExp]> = [
  ['access log (pino)', /\/node_modules\/(pino|sonic-boom|quick-format-unescaped|fast-redact|@pinojs)\/|\/dist\/observability\/log\.js/],
  [
    'metrics (prom-client, route labels)',
    /\/node_modules\/(prom-client|tdigest|bintrees)\/|\/dist\/gateway\/route-label\.js|\/dist\/observability\/metrics\.js/,
  ],
  ['Redis client (ioredis)', /\/node_modules\/(ioredis|redis-parser|standard-as-callback|cluster-key-slot|denque|redis-errors)\//],
  ['quota policy and headers', /\/dist\/(gateway\/policies\/enforce-quota|gateway\/local-verdicts|quota\/|store\/)/],
  ['authentication (key parse, hash, cache)', /\/dist\/(gateway\/policies\/(authenticate|limit-failed-auth)|gateway\/key-cache|keys\/)/],
  [
    'upstream identity (headers, assertion)',
    /\/dist\/(gateway\/policies\/upstream-identity|gateway\/assertion-signer|gateway\/upstream-headers|identity\/)|\/node_modules\/jose\//,
  ],
  ['request id', /\/dist\/gateway\/policies\/request-id/],
  ['route rules, openapi', /\/dist\/gateway\/(policies\/(apply-route-rules|serve-openapi)|route-rules|openapi-document)/],
  ['policy chain, access-log glue', /\/dist\/gateway\/(chain|context|send-answer|access-log)\.js/],
];
const SHARED = 'HTTP server + proxy (what the bare proxy does too)';

function concernOf(stack: CallFrame[]): string {
  for (const frame of stack) {
    if (frame.functionName === '(garbage collector)') return '(garbage collector)';
    for (const [concern, url] of CONCERNS) if (url.test(frame.url)) return concern;
  }
  return stack.length === 1 && stack[0]!.functionName.startsWith('(') ? stack[0]!.functionName : SHARED;
}

/** Who a frame belongs to: a tollgate file, an npm package, a Node core module, or V8 itself. */
export function ownerOf(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (!url) return functionName.startsWith('(') ? functionName : '(native)';
  const pkg = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (pkg) return pkg[1]!;
  if (url.startsWith('node:'))
    return `node:${
      url
        .slice(5)
        .replace(/^internal\//, '')
        .split('/')[0]
    }`;
  const own = /\/dist\/(.+)$/.exec(url);
  if (own) return `tollgate ${own[1]!.split('/').slice(0, -1).join('/') || own[1]}`;
  return url;
}

/** A location that reads the same in any checkout: dist-relative, package-relative or node:… */
function where(frame: CallFrame): string {
  const own = /\/dist\/(.+)$/.exec(frame.url);
  const pkg = /\/node_modules\/(.+)$/.exec(frame.url);
  const file = own?.[1] ?? pkg?.[1] ?? frame.url;
  return file ? `${file}:${frame.lineNumber + 1}` : '';
}

function bump(map: Map<string, Entry>, key: string, name: string, at: string, us: number): void {
  const entry = map.get(key);
  if (entry) entry.us += us;
  else map.set(key, { name, where: at, us });
}

/**
 * Aggregates the samples taken between `fromUs` and `toUs` (profile clock; default: all). A
 * sample's time is the interval until the next sample (the convention of Chrome DevTools).
 */
export function aggregate(profile: CpuProfile, window?: { fromUs: number; toUs: number }): Aggregate {
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const node of profile.nodes) {
    byId.set(node.id, node);
    for (const child of node.children ?? []) parent.set(child, node.id);
  }
  const fromUs = window?.fromUs ?? profile.startTime;
  const toUs = window?.toUs ?? profile.endTime;
  const selfUs = new Map<number, number>();
  let at = profile.startTime;
  const { samples, timeDeltas } = profile;
  for (let i = 0; i < samples.length; i++) {
    at += timeDeltas[i] ?? 0;
    if (at < fromUs || at > toUs) continue;
    const us = timeDeltas[i + 1] ?? 0;
    selfUs.set(samples[i]!, (selfUs.get(samples[i]!) ?? 0) + us);
  }

  const result: Aggregate = {
    wallUs: Math.min(toUs, profile.endTime) - Math.max(fromUs, profile.startTime),
    idleUs: 0,
    byFunction: new Map(),
    byOwner: new Map(),
    byConcern: new Map(),
    inclusiveOwn: new Map(),
  };
  for (const [id, us] of selfUs) {
    const frame = byId.get(id)!.callFrame;
    if (frame.functionName === '(idle)') {
      result.idleUs += us;
      continue;
    }
    const at = where(frame);
    bump(result.byFunction, `${frame.functionName}@${at}`, frame.functionName || '(anonymous)', at, us);
    const owner = ownerOf(frame);
    bump(result.byOwner, owner, owner, '', us);
    const stack: CallFrame[] = [];
    for (let node: number | undefined = id; node !== undefined; node = parent.get(node)) stack.push(byId.get(node)!.callFrame);
    // The root frame '(root)' says nothing; drop it.
    if (stack.length > 1) stack.pop();
    const concern = concernOf(stack);
    bump(result.byConcern, concern, concern, '', us);
    // Inclusive time of our own functions: each function counted once per stack (recursion).
    const seen = new Set<string>();
    for (const f of stack) {
      if (!/\/dist\/(?!bench\/)/.test(f.url)) continue;
      const fAt = where(f);
      const key = `${f.functionName}@${fAt}`;
      if (seen.has(key)) continue;
      seen.add(key);
      bump(result.inclusiveOwn, key, f.functionName || '(anonymous)', fAt, us);
    }
  }
  return result;
}

function top(map: Map<string, Entry>, n: number, busyUs: number): Row[] {
  return [...map.values()]
    .sort((a, b) => b.us - a.us)
    .slice(0, n)
    .map((e) => ({ name: e.name, where: e.where, ms: e.us / 1000, percent: (100 * e.us) / busyUs }));
}

export function summarise(agg: Aggregate, n = 30): ProfileSummary {
  const busyUs = agg.wallUs - agg.idleUs;
  return {
    wallMs: agg.wallUs / 1000,
    busyMs: busyUs / 1000,
    selfByFunction: top(agg.byFunction, n, busyUs),
    selfByOwner: top(agg.byOwner, n, busyUs),
    byConcern: top(agg.byConcern, n, busyUs),
    inclusiveOwn: top(agg.inclusiveOwn, n, busyUs),
  };
}

export interface DiffRow {
  name: string;
  where: string;
  /** Main-thread microseconds per request. */
  tollgateUs: number;
  bareUs: number;
  addedUs: number;
}

export interface ProfileDiff {
  tollgateBusyUsPerRequest: number;
  bareBusyUsPerRequest: number;
  byConcern: DiffRow[];
  byOwner: DiffRow[];
  byFunction: DiffRow[];
}

/** What the gateway spends per request beyond the bare proxy, by owner and by function. */
export function diff(tollgate: Aggregate, tollgateRequests: number, bare: Aggregate, bareRequests: number, n = 30): ProfileDiff {
  const rows = (a: Map<string, Entry>, b: Map<string, Entry>) => {
    const keys = new Set([...a.keys(), ...b.keys()]);
    return [...keys]
      .map((key) => {
        const t = a.get(key);
        const u = b.get(key);
        const tollgateUs = (t?.us ?? 0) / tollgateRequests;
        const bareUs = (u?.us ?? 0) / bareRequests;
        return { name: (t ?? u)!.name, where: (t ?? u)!.where, tollgateUs, bareUs, addedUs: tollgateUs - bareUs };
      })
      .sort((x, y) => Math.abs(y.addedUs) - Math.abs(x.addedUs))
      .slice(0, n);
  };
  return {
    tollgateBusyUsPerRequest: (tollgate.wallUs - tollgate.idleUs) / tollgateRequests,
    bareBusyUsPerRequest: (bare.wallUs - bare.idleUs) / bareRequests,
    byConcern: rows(tollgate.byConcern, bare.byConcern),
    byOwner: rows(tollgate.byOwner, bare.byOwner),
    byFunction: rows(tollgate.byFunction, bare.byFunction),
  };
}

export function formatSummary(summary: ProfileSummary): string {
  const table = (title: string, rows: Row[], withWhere: boolean) =>
    [
      title,
      ...rows.map(
        (r) =>
          `  ${r.percent.toFixed(1).padStart(5)}%  ${r.ms.toFixed(0).padStart(7)} ms  ${r.name}${withWhere && r.where ? `  (${r.where})` : ''}`,
      ),
    ].join('\n');
  return [
    `${summary.wallMs.toFixed(0)} ms wall, ${summary.busyMs.toFixed(0)} ms busy on the main thread (${((100 * summary.busyMs) / summary.wallMs).toFixed(0)}%); percentages are of busy time`,
    table('time by concern (innermost tollgate concern on the stack):', summary.byConcern, false),
    table('self time by owner:', summary.selfByOwner, false),
    table(`top ${summary.selfByFunction.length} functions by self time:`, summary.selfByFunction, true),
    table("tollgate's own functions, inclusive time (self + callees):", summary.inclusiveOwn, true),
  ].join('\n\n');
}

export function formatDiff(d: ProfileDiff, a = 'tollgate', b = 'bare'): string {
  const table = (title: string, rows: DiffRow[], withWhere: boolean) =>
    [
      title,
      `  ${'added'.padStart(6)}  ${a.slice(0, 8).padStart(8)}  ${b.slice(0, 8).padStart(8)}   (µs of main-thread CPU per request)`,
      ...rows.map(
        (r) =>
          `  ${r.addedUs.toFixed(1).padStart(6)}  ${r.tollgateUs.toFixed(1).padStart(8)}  ${r.bareUs.toFixed(1).padStart(8)}   ${r.name}${withWhere && r.where ? `  (${r.where})` : ''}`,
      ),
    ].join('\n');
  const added = d.tollgateBusyUsPerRequest - d.bareBusyUsPerRequest;
  return [
    `main thread busy per request: ${a} ${d.tollgateBusyUsPerRequest.toFixed(0)} µs, ${b} ${d.bareBusyUsPerRequest.toFixed(0)} µs (${added >= 0 ? '+' : ''}${added.toFixed(0)} µs)`,
    table('by concern:', d.byConcern, false),
    table(
      'by owner:',
      d.byOwner.filter((r) => Math.abs(r.addedUs) > 0.5),
      false,
    ),
    table(`top ${d.byFunction.length} functions:`, d.byFunction, true),
  ].join('\n\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string' }, requests: { type: 'string' } } });
  const n = Number(values.top ?? 30);
  if (positionals.length === 0) {
    process.stderr.write(
      'usage: node dist/bench/profile-summary.js GATEWAY.cpuprofile [BARE.cpuprofile --requests TOLLGATE,BARE] [--top N]\n',
    );
    process.exit(2);
  }
  const load = (file: string) => aggregate(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile);
  const gateway = load(positionals[0]!);
  process.stdout.write(`${formatSummary(summarise(gateway, n))}\n`);
  if (positionals[1]) {
    const bare = load(positionals[1]);
    // Without request counts, compare per millisecond of busy time.
    const [t, b] = (values.requests ?? '').split(',').map(Number);
    const perT = t || (gateway.wallUs - gateway.idleUs) / 1000;
    const perB = b || (bare.wallUs - bare.idleUs) / 1000;
    process.stdout.write(`\n${formatDiff(diff(gateway, perT, bare, perB, n))}\n`);
  }
}
