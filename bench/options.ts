import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { REPO_ROOT } from '../test/harness/tollgate.js';
import { DEFAULT_TARGETS, TARGET_NAMES, UPSTREAM_NAMES, type UpstreamName } from './targets.js';
import { TLS_TARGET_NAMES, TRANSPORT_NAMES, type Transport } from './transports.js';

export const PHASES = ['throughput', 'latency', 'overlimit', 'memory', 'profile', 'soak', 'exactness'] as const;
export type Phase = (typeof PHASES)[number];
export const PIN_MODES = ['split', 'loadgen', 'none'] as const;
export type PinMode = (typeof PIN_MODES)[number];

export const HELP = `npm run bench -- [options]

  --rounds N            alternating measured rounds per side (default 3)
  --duration S          seconds per throughput round (default 10)
  --warmup S            seconds of warmup per side, not measured (default 5)
  --connections N       keep-alive connections (default 50)
  --upstreams LIST      what the throughput phase runs every target in front of, comma-separated, of
                        plain (a plain Node http.createServer with defaults: Keep-Alive timeout=5),
                        bundled (the category backend: timeout=65); default both, one table each.
                        The other phases use the bundled backend; profile uses the plain one with
                        --upstreams plain
  --transport LIST      what the throughput phase speaks to the proxies, comma-separated, of http
                        (default), tls (HTTP/1.1 over TLS, wrk against https://) and h2 (HTTP/2 over
                        TLS, h2load -m 1 from nghttp2-client). For tls and h2, ${TLS_TARGET_NAMES.join(' and ')}
                        and every --compare/--variant build get a second process each, serving a
                        certificate made for the run (openssl, in the scratch directory); a table
                        gives every transport side by side, with the ratios to bare on the same
                        transport. Issue 23's run: --phases throughput --targets bare,tollgate
                        --transport http,tls,h2 --upstreams plain
  --restart             the throughput phase gives every tollgate build (this checkout, --compare,
                        --variant, its other targets; over plain HTTP) a new process before each
                        round after the first, warmed up for --warmup seconds: each round then samples another
                        process. Two processes of one build differ by up to 2-3 % (heap layout, JIT
                        decisions; an A/A run of one build as two sides): with --restart that
                        luck averages out over the rounds instead of favouring one side in all of
                        them. For A/B judgements of a few percent
  --pin MODE            the throughput phase's CPUs (needs taskset; 2+ CPUs): split (default): wrk on
                        the last CPU, the proxy under test on the others, upstreams and Redis free;
                        loadgen: only wrk pinned; none
  --wrk-threads N       wrk's threads (default 1: one CPU's worth of load generator)
  --latency-duration S  seconds per fixed-rate round (default 10)
  --latency-rounds N    alternating fixed-rate rounds per side (default 2)
  --rate N              fixed rate of the latency rounds (default: half the bare proxy's maximum)
  --many-keys N         the latency phase also calls tollgate and tollgate-leases (when in --targets)
                        with a different key per request, round robin over N keys (default 10000; 0:
                        not), one row each beside their one-key rows: what a warm key (its record
                        cached: each round begins with a pass over every key) costs in p50/p90/p99
                        and Redis commands per request (bench/many-keys.ts); each
                        --compare/--variant build gets such a row too. Its run:
                        npm run bench -- --phases latency --targets bare,tollgate,tollgate-leases
  --wrk-keys N          keys the throughput phase's tollgate-2000-keys target sends in turn, one per
                        request (default 2000; bench/many-keys-wrk.ts): many warm keys, none hot
                        (warm keys' leases), beside tollgate's one key in the same rounds. Its run:
                        npm run bench -- --phases throughput --targets bare,tollgate,tollgate-2000-keys --upstreams plain
  --keys N              key records written to Redis for the memory and soak runs (default 120000)
  --distinct N          distinct keys the memory run sends, one request each, in 4 steps (default:
                        all of them). The key cache holds keyCache.maxEntries (100000): to see
                        memory level off beyond it, run with --keys 1000000 --distinct 400000
  --phases LIST         comma-separated, of ${PHASES.join(', ')}
                        (default: all but profile, soak and exactness)
  --soak-minutes M      length of the soak phase (default 10; 1 with --quick). The soak: --keys records
                        in Redis, a gateway of its own sent requests over all of them (each pass in a
                        new random order) at --soak-rate for M minutes, its RSS and JS heap sampled
                        every 10 s; judged flat if RSS stays within ±10% of its mean after warmup (the
                        first pass over every key, at least M/4). Also the heap per cached
                        key (forced GC before and after). Issue 14's run:
                        npm run bench -- --phases soak --targets tollgate --keys 100000
  --soak-rate R         requests per second of the soak, open loop (default 1000)
  --exactness-minutes M whole UTC minutes of the exactness phase (default 2), after the partial one it
                        starts in. The phase: 3 gateways with quota leases on, sharing the run's
                        redis-server, one key with a per-minute limit sent over it, round robin over
                        the three (open loop); per minute window on Redis's clock (from each answer's
                        X-RateLimit-Reset): admitted (must be the limit in full windows, never more),
                        refused, Redis commands per request; partial windows marked. Bans off for it
                        (bench/phases/exactness.ts). Its run (bare: no other gateway on Redis):
                        npm run bench -- --phases exactness --targets bare
  --exactness-limit N   the key's per-minute limit (default 3000)
  --exactness-rate R    requests per second sent (default: 4 × the limit / 60, 200 for 3000)
  --profile             also profile bare proxy and gateway under load (node --cpu-prof)
  --targets LIST        comma-separated, of ${TARGET_NAMES.join(', ')}
                        (default: ${DEFAULT_TARGETS.join(', ')}). The tollgate-gcra, -cost, -owner
                        and -month targets are tollgate with the run's key on a gcra plan, on a route
                        of cost 3, on an owner-scoped plan, or on a plan with a month in Europe/Berlin
                        (bench/quota-variants.ts): each feature's cost beside fixed windows, in the
                        same rounds. tollgate-limits: three limit rules matching the path, decided
                        with the plan (one script call per key and turn; beside tollgate-no-leases, the
                        plan alone on the same path; each --compare/--variant build runs both too,
                        as <build>-limits and <build>-no-leases). With --phases profile, each of these quota
                        variants in --targets is profiled too, beside the first one named.
                        tollgate-3-targets: the path served
                        by a service of three instances of the upstream, round robin
                        (bench/spread-target.ts); the report shows how its requests spread.
                        tollgate-policies: a configured no-op policy in every phase
                        (bench/policy-target.ts): the policy interface's cost per request,
                        and <build>-policies for each --compare build. With --phases profile,
                        also profiled beside tollgate.
                        tollgate-edge-rules: IP rules and header rules in force on the path
                        (bench/edge-rules-target.ts), and <build>-edge-rules for each --compare build.
                        tollgate-jwt: tollgate called with a JWT access token (RS256, from a JWKS
                        the bench serves) instead of the API key (bench/jwt-target.ts)
                        tollgate-cache: tollgate with the response cache on for the path (memory,
                        ttlSeconds 5; in front of plain, an upstream twin sending Cache-Control:
                        public, max-age=5); the report judges the upstream's requests per client
                        request (≤ 0.01) and the ratio to bare (≥ 2×) (bench/cache-target.ts).
                        tollgate-post, tollgate-post-validated: POST /v1/categories with a small
                        JSON body, without and with OpenAPI validation (enforce), plain upstream
                        only; the report judges their ratio (≥ 0.9×) (bench/post-targets.ts).
                        Their runs:
                        npm run bench -- --phases throughput --targets bare,tollgate,tollgate-cache
                        npm run bench -- --phases throughput --upstreams plain
                          --targets bare,tollgate-post,tollgate-post-validated
  --compare REF         also measure tollgate built from git REF (a commit, branch or tag), in Redis
                        mode, in the same rounds: every change judged A/B. Built once per commit into
                        ${'$'}TMPDIR/tollgate-bench-builds/ (git archive, npm ci, build); repeatable
  --variant NAME=CLI    also measure another build of the gateway (path to its dist/cli/main.js)
                        in the throughput and latency rounds; repeatable. For A/B-testing a change.
  --gateway-node-args=A  Node options for the gateways, space-separated, e.g. --gateway-node-args=--max-old-space-size=256
                        (a memory run with a capped heap shows whether memory is bounded or leaks)
  --out DIR             where latest.json, latest.md and profiles go (default bench-results)
  --quick               a smoke run: 1 round of 3 s, 20000 keys`;

export interface Options {
  rounds: number;
  durationSeconds: number;
  warmupSeconds: number;
  connections: number;
  upstreams: UpstreamName[];
  transports: Transport[];
  pin: PinMode;
  wrkThreads: number;
  latencySeconds: number;
  latencyRounds: number;
  rate?: number;
  /** Keys of the latency phase's many-keys rows (0: none). */
  manyKeys: number;
  /** Keys of the throughput phase's tollgate-2000-keys target. */
  wrkKeys: number;
  keys: number;
  distinct: number;
  soakMinutes: number;
  soakRate: number;
  exactnessMinutes: number;
  exactnessLimit: number;
  /** Unset: 4 × exactnessLimit / 60. */
  exactnessRate?: number;
  phases: Set<Phase>;
  /** A new process for every tollgate build before each throughput round after the first. */
  restart: boolean;
  targets: string[];
  /** Git refs to build and measure beside this checkout (names of their variants: tollgate@REF). */
  compare: string[];
  variants: Array<{ name: string; cli: string }>;
  gatewayNodeArgs: string[];
  outDir: string;
}

export function parseOptions(argv: string[]): Options | 'help' {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      rounds: { type: 'string' },
      duration: { type: 'string' },
      warmup: { type: 'string' },
      connections: { type: 'string' },
      upstreams: { type: 'string' },
      transport: { type: 'string' },
      pin: { type: 'string' },
      restart: { type: 'boolean' },
      'wrk-threads': { type: 'string' },
      'latency-duration': { type: 'string' },
      'latency-rounds': { type: 'string' },
      rate: { type: 'string' },
      'many-keys': { type: 'string' },
      'wrk-keys': { type: 'string' },
      keys: { type: 'string' },
      distinct: { type: 'string' },
      'soak-minutes': { type: 'string' },
      'soak-rate': { type: 'string' },
      'exactness-minutes': { type: 'string' },
      'exactness-limit': { type: 'string' },
      'exactness-rate': { type: 'string' },
      phases: { type: 'string' },
      profile: { type: 'boolean' },
      targets: { type: 'string' },
      compare: { type: 'string', multiple: true },
      variant: { type: 'string', multiple: true },
      'gateway-node-args': { type: 'string' },
      out: { type: 'string' },
      quick: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return 'help';
  const quick = values.quick ?? false;
  const int = (raw: string | undefined, fallback: number, name: string) => {
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer, got "${raw}"`);
    return n;
  };
  const keys = int(values.keys, quick ? 20_000 : 120_000, 'keys');
  const phases = new Set<Phase>();
  for (const name of (values.phases ?? 'throughput,latency,overlimit,memory').split(',')) {
    if (!PHASES.includes(name as Phase)) throw new Error(`unknown phase "${name}" (phases: ${PHASES.join(', ')})`);
    phases.add(name as Phase);
  }
  if (values.profile) phases.add('profile');
  const variants = (values.variant ?? []).map((spec) => {
    const at = spec.indexOf('=');
    if (at < 1) throw new Error(`--variant wants NAME=PATH/TO/dist/cli/main.js, got "${spec}"`);
    return { name: spec.slice(0, at), cli: resolve(spec.slice(at + 1)) };
  });
  const targets = (values.targets ?? DEFAULT_TARGETS.join(',')).split(',');
  for (const name of targets) {
    if (!(TARGET_NAMES as readonly string[]).includes(name))
      throw new Error(`unknown target "${name}" (targets: ${TARGET_NAMES.join(', ')})`);
  }
  const upstreams = (values.upstreams ?? UPSTREAM_NAMES.join(',')).split(',') as UpstreamName[];
  for (const name of upstreams) {
    if (!UPSTREAM_NAMES.includes(name)) throw new Error(`unknown upstream "${name}" (upstreams: ${UPSTREAM_NAMES.join(', ')})`);
  }
  const transports = (values.transport ?? 'http').split(',') as Transport[];
  for (const name of transports) {
    if (!TRANSPORT_NAMES.includes(name)) throw new Error(`unknown transport "${name}" (transports: ${TRANSPORT_NAMES.join(', ')})`);
  }
  const pin = (values.pin ?? 'split') as PinMode;
  if (!PIN_MODES.includes(pin)) throw new Error(`unknown --pin "${pin}" (of ${PIN_MODES.join(', ')})`);
  return {
    targets,
    upstreams,
    transports,
    pin,
    restart: values.restart ?? false,
    wrkThreads: int(values['wrk-threads'], 1, 'wrk-threads'),
    compare: values.compare ?? [],
    rounds: int(values.rounds, quick ? 1 : 3, 'rounds'),
    durationSeconds: int(values.duration, quick ? 3 : 10, 'duration'),
    warmupSeconds: int(values.warmup, quick ? 2 : 5, 'warmup'),
    connections: int(values.connections, 50, 'connections'),
    latencySeconds: int(values['latency-duration'], quick ? 3 : 10, 'latency-duration'),
    latencyRounds: int(values['latency-rounds'], 2, 'latency-rounds'),
    rate: values.rate === undefined ? undefined : int(values.rate, 0, 'rate'),
    manyKeys: values['many-keys'] === '0' ? 0 : int(values['many-keys'], 10_000, 'many-keys'),
    wrkKeys: int(values['wrk-keys'], 2000, 'wrk-keys'),
    keys,
    distinct: Math.min(keys, int(values.distinct, keys, 'distinct')),
    soakMinutes: int(values['soak-minutes'], quick ? 1 : 10, 'soak-minutes'),
    soakRate: int(values['soak-rate'], 1000, 'soak-rate'),
    exactnessMinutes: int(values['exactness-minutes'], 2, 'exactness-minutes'),
    exactnessLimit: int(values['exactness-limit'], 3000, 'exactness-limit'),
    exactnessRate: values['exactness-rate'] === undefined ? undefined : int(values['exactness-rate'], 0, 'exactness-rate'),
    phases,
    variants,
    gatewayNodeArgs: (values['gateway-node-args'] ?? '').split(' ').filter(Boolean),
    outDir: resolve(values.out ?? resolve(REPO_ROOT, 'bench-results')),
  };
}
