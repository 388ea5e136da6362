import { randomBytes } from 'node:crypto';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Redis } from 'ioredis';
import { freePort } from '../test/harness/free-port.js';
import { NodeProcess } from '../test/harness/node-process.js';
import { RedisServer } from '../test/harness/redis-server.js';
import { CLI, REPO_ROOT, startTollgate } from '../test/harness/tollgate.js';
import { createKeyWithCli, createKeysInBulk } from './keys.js';
import type { Options } from './options.js';
import { logFileOf, runCliOrThrow, workDir } from './processes.js';
import { BUILD_QUOTA_VARIANTS, buildVariantName, QUOTA_VARIANT_NAMES, quotaVariantConfig } from './quota-variants.js';
import { MANY_KEYS_WRK_TARGET, manyKeysBuildName } from './many-keys-wrk.js';
import { JWT_TARGET, jwtConfig, startBenchIssuer, type BenchIssuer } from './jwt-target.js';
import { EDGE_RULES_TARGET, edgeRulesConfig } from './edge-rules-target.js';
import { POLICY_TARGET, policyConfig } from './policy-target.js';
import { SPREAD_INSTANCES, SPREAD_TARGET, spreadConfig } from './spread-target.js';
import { CACHE_CONTROL, CACHE_TARGET, cacheConfig } from './cache-target.js';
import { POST_REQUEST, POST_TARGET_NAMES, postConfig, type RequestSpec } from './post-targets.js';
import { TRACE_TARGET_NAMES, traceEnv } from './trace-targets.js';
import type { UpstreamName } from './targets.js';
import { makeCertificate, TLS_TARGET_NAMES, type Certificate } from './transports.js';

export const PATH = '/v1/categories';

/**
 * What a target is to the report: the ceiling of our proxy stack, a peer gateway users could pick
 * instead, or a tollgate build.
 */
export type TargetKind = 'bare' | 'reference' | 'peer' | 'tollgate';

export interface Upstream {
  name: UpstreamName;
  url: string;
  process: NodeProcess;
  /** Serves `{"accepted":N,"requests":M}`: the TCP connections and requests the upstream has accepted (./peers/count-connections.ts). */
  connectionsUrl: string;
}

/** A proxy under test. */
export interface Target {
  name: string;
  kind: TargetKind;
  /** The upstream it forwards to. */
  upstream: UpstreamName;
  url: string;
  process: NodeProcess;
  /** Talks to the run's Redis (its commands are counted per request). */
  usesRedis: boolean;
  /** Tollgate's admin listener (/metrics). */
  adminUrl?: string;
  /** `tollgate-3-targets`: the URLs of its service's targets, the run's upstream first (./spread-target.ts). */
  spreadUrls?: string[];
  /** A tollgate build: starts another process of it, as this one was started (--restart). */
  startAgain?: () => NodeProcess;
  /** The credential it is called with, when not the run's API key (`tollgate-jwt`: a JWT). */
  headers?: Record<string, string>;
  /** What it forwards to when not its table's upstream process (`tollgate-cache` in front of plain: a cacheable twin). */
  via?: Upstream;
  /** Its request when not `GET ${PATH}` (the POST targets, ./post-targets.ts). */
  request?: RequestSpec;
  /** API keys wrk sends in turn instead of the run's one (./many-keys-wrk.ts). */
  rotateKeys?: string[];
}

// Peers and launchers are TypeScript run by tsx, as `npm run bench` runs this file.
const TS = ['--import', 'tsx'];
const peer = (file: string) => join(REPO_ROOT, 'bench/peers', file);
/** Preloaded into both upstreams: counts the connections they accept. */
const COUNT_CONNECTIONS = [...TS, '--import', pathToFileURL(peer('count-connections.ts')).href];
const ENTERPRISE_QUOTAS = ['--per-minute', '100000000', '--per-day', '1000000000'];

/**
 * Everything a run needs, each in its own process (test/harness/ starts them): a redis-server,
 * the category backend as the shared upstream, the bare proxy, the peer gateways, tollgate (Redis
 * and embedded) and any other builds of it, and an API key created with the CLI. When the
 * throughput phase runs in front of the plain Node upstream too (--upstreams), that upstream and a
 * second set of the same targets, forwarding to it; the profile phase uses that upstream when
 * --upstreams names it alone.
 */
export class Stack {
  private readonly processes: NodeProcess[] = [];
  private readonly stopped = new Set<NodeProcess>();
  readonly admin: Redis;
  /** The keys of `tollgate-2000-keys`, written once per run (./many-keys-wrk.ts). */
  private manyKeys?: Promise<string[]>;
  backendUrl = '';
  private backend!: NodeProcess;
  private readonly upstreamList: Upstream[] = [];
  keyId = '';
  headers: Record<string, string> = {};
  /** In front of the bundled backend: what every phase measures. */
  private all: Target[] = [];
  /** The same targets in front of the plain Node upstream (throughput phase only). */
  private plain: Target[] = [];
  /** With --transport tls or h2: the TLS twins of bare and tollgate, per upstream (throughput phase only). */
  private readonly tls = new Map<UpstreamName, Target[]>();
  /** The run's certificate, which every TLS twin serves. */
  certificate?: Certificate;
  // Gateways, peers, backend and bare proxy share an assertion secret of this run's own.
  private readonly secretEnv = { TOLLGATE_ASSERTION_SECRET: randomBytes(48).toString('base64') };
  private gatewayNodeArgs: string[] = [];
  /** The bench's own identity provider, once `tollgate-jwt` asked for it. */
  private issuer?: Promise<BenchIssuer>;
  /** The URL of the run's OTLP sink, once a tracing target asked for it. */
  private sink?: Promise<string>;

  private constructor(readonly redis: RedisServer) {
    this.admin = redis.client();
  }

  static async start(options: Options): Promise<Stack> {
    const stack = new Stack(await RedisServer.start([], { logFile: logFileOf('redis') }));
    try {
      await stack.startAll(options);
    } catch (err) {
      await stack.close();
      throw err;
    }
    return stack;
  }

  private async startAll(options: Options): Promise<void> {
    this.gatewayNodeArgs = options.gatewayNodeArgs;
    // Quotas high enough never to refuse: the benchmark measures the full policy, not 429s.
    // Owner `bench`: what the tollgate-owner target shares (other targets' plans ignore it).
    const { id, key } = await createKeyWithCli(this.redis.url, ['--plan', 'enterprise', ...ENTERPRISE_QUOTAS, '--owner', 'bench']);
    this.keyId = id;
    this.headers = { authorization: `Bearer ${key}` };
    // A balance no run spends, for the plan that requires credits (tollgate-month-credits).
    await runCliOrThrow(['keys', 'credits', 'add', id, '1000000000000', '--reason', 'benchmark'], { REDIS_URL: this.redis.url });

    // The upstream: the bundled category backend, in memory (REDIS_URL unset). Its own request log
    // is off (warn): it is the same work behind every proxy and would only blur the ratios. With
    // no info lines there is no "backend listening" line to read the port from: it is picked here.
    const backendPort = await freePort();
    const backendCounter = await freePort();
    this.backend = this.spawn(
      'backend',
      [CLI, 'backend'],
      { BACKEND_PORT: String(backendPort), LOG_LEVEL: 'warn', BENCH_CONNECTIONS_PORT: String(backendCounter) },
      COUNT_CONNECTIONS,
    );
    this.backendUrl = `http://127.0.0.1:${backendPort}`;
    await this.backend.accepting(backendPort);
    await this.backend.accepting(backendCounter);
    const bundled = {
      name: 'bundled',
      url: this.backendUrl,
      process: this.backend,
      connectionsUrl: `http://127.0.0.1:${backendCounter}`,
    } as const;

    const plainRuns = (options.phases.has('throughput') || options.phases.has('profile')) && options.upstreams.includes('plain');
    if (!plainRuns && options.targets.some((name) => (POST_TARGET_NAMES as string[]).includes(name)))
      throw new Error(`${POST_TARGET_NAMES.join(' and ')} run in front of the plain upstream only: --phases throughput --upstreams plain`);
    if (plainRuns) {
      const plain = await this.startPlainUpstream('plain-upstream');
      this.upstreamList.push(plain);
      this.plain = await this.startTargets(options, key, plain.url, 'plain', '-plain');
    }
    this.upstreamList.push(bundled);
    this.all = await this.startTargets(options, key, this.backendUrl, 'bundled', '');

    if (options.phases.has('throughput') && options.transports.some((t) => t !== 'http')) {
      this.certificate = makeCertificate(workDir());
      for (const upstream of this.upstreamList.filter((u) => options.upstreams.includes(u.name)))
        this.tls.set(upstream.name, await this.startTlsTargets(options, upstream.url, upstream.name, this.certificate));
    }
  }

  /** A plain Node upstream (./peers/plain-upstream.ts), counting its connections and requests. */
  private async startPlainUpstream(name: string, env: Record<string, string> = {}): Promise<Upstream> {
    const counter = await freePort();
    const process = this.spawn(name, [peer('plain-upstream.ts')], { ...env, BENCH_CONNECTIONS_PORT: String(counter) }, COUNT_CONNECTIONS);
    const url = await process.listening('plain upstream');
    await process.accepting(counter);
    return { name: 'plain', url, process, connectionsUrl: `http://127.0.0.1:${counter}` };
  }

  /**
   * The TLS twins of bare, tollgate and any other build (--compare, --variant) in front of one
   * upstream: the same programs, given the run's certificate (tollgate: GATEWAY_TLS_CERT/KEY; the
   * bare proxy: BENCH_TLS_CERT/KEY), each one listener for HTTP/1.1 and HTTP/2 by ALPN.
   */
  private async startTlsTargets(options: Options, upstreamUrl: string, upstream: UpstreamName, cert: Certificate): Promise<Target[]> {
    const want = new Set(options.targets.filter((name) => TLS_TARGET_NAMES.includes(name)));
    const list: Target[] = [];
    const suffix = `-tls-${upstream}`;
    if (want.has('bare')) {
      const process = this.startBare(`bare-proxy${suffix}`, [], upstreamUrl, {
        BENCH_TLS_CERT: cert.certFile,
        BENCH_TLS_KEY: cert.keyFile,
      });
      list.push({ name: 'bare', kind: 'bare', upstream, url: await process.listening('bare proxy'), process, usesRedis: false });
    }
    const gateways = [...(want.has('tollgate') ? [{ name: 'tollgate', cli: CLI }] : []), ...options.variants];
    for (const { name, cli } of gateways) {
      // startGateway's environment, and the certificate.
      const env = {
        TOLLGATE_CONFIG_DIR: resolve(dirname(cli), '../../config'),
        REDIS_URL: this.redis.url,
        UPSTREAM_URL: upstreamUrl,
        GATEWAY_PORT: '0',
        ADMIN_PORT: '0',
        LOG_LEVEL: 'info',
        GATEWAY_TLS_CERT: cert.certFile,
        GATEWAY_TLS_KEY: cert.keyFile,
      };
      const process = this.spawn(`gateway-${name}${suffix}`, [cli, 'gateway'], env, this.gatewayNodeArgs);
      const url = await process.listening('gateway');
      if (!url.startsWith('https:')) throw new Error(`${name} listens on ${url} with GATEWAY_TLS_CERT set: a build without TLS`);
      const adminUrl = await process.listening('admin').catch(() => undefined);
      list.push({ name, kind: 'tollgate', upstream, url, process, usesRedis: true, adminUrl });
    }
    return list;
  }

  /** The targets of the run, in front of one upstream; `suffix` tells their log files apart. */
  private async startTargets(
    options: Options,
    key: string,
    upstreamUrl: string,
    upstream: UpstreamName,
    suffix: string,
  ): Promise<Target[]> {
    const want = new Set(options.targets);
    const list: Target[] = [];
    const add = async (target: Omit<Target, 'url' | 'upstream'> & { role: string }) => {
      const { role, ...rest } = target;
      list.push({ ...rest, upstream, url: await target.process.listening(role) });
    };
    const addGateway = async (name: string, start: () => NodeProcess, usesRedis = true) => {
      const process = start();
      const url = await process.listening('gateway');
      const adminUrl = await process.listening('admin').catch(() => undefined);
      list.push({ name, kind: 'tollgate', upstream, url, process, usesRedis, adminUrl, startAgain: start });
    };
    if (want.has('bare'))
      await add({
        name: 'bare',
        kind: 'bare',
        role: 'bare proxy',
        process: this.startBare(`bare-proxy${suffix}`, [], upstreamUrl),
        usesRedis: false,
      });
    if (want.has('bare-undici'))
      await add({
        name: 'bare-undici',
        kind: 'reference',
        role: 'bare undici',
        process: this.spawn(`bare-undici${suffix}`, [peer('bare-undici.ts'), upstreamUrl, this.keyId, 'enterprise'], {}, TS),
        usesRedis: false,
      });
    if (want.has('naive'))
      await add({
        name: 'naive',
        kind: 'peer',
        role: 'naive gateway',
        process: this.startPeer(`naive${suffix}`, 'naive-gateway.ts', upstreamUrl),
        usesRedis: true,
      });
    if (want.has('fastify'))
      await add({
        name: 'fastify',
        kind: 'peer',
        role: 'fastify gateway',
        process: this.startPeer(`fastify${suffix}`, 'fastify-gateway.ts', upstreamUrl),
        usesRedis: true,
      });
    if (want.has('tollgate')) await addGateway('tollgate', () => this.startGateway(`gateway${suffix}`, [], CLI, undefined, upstreamUrl));
    if (want.has('tollgate-embedded'))
      await addGateway('tollgate-embedded', () => this.startEmbedded(`gateway-embedded${suffix}`, key, upstreamUrl), false);
    if (want.has(JWT_TARGET)) {
      const issuer = await (this.issuer ??= startBenchIssuer());
      const config = jwtConfig(issuer.jwksUrl, suffix);
      await addGateway(JWT_TARGET, () => this.startGateway(`gateway-${JWT_TARGET}${suffix}`, [], CLI, config, upstreamUrl));
      list.at(-1)!.headers = issuer.headers;
    }
    for (const name of QUOTA_VARIANT_NAMES) {
      if (!want.has(name)) continue;
      await addGateway(name, () => this.startGateway(`gateway-${name}${suffix}`, [], CLI, quotaVariantConfig(name), upstreamUrl));
      if (!BUILD_QUOTA_VARIANTS.includes(name)) continue;
      for (const variant of options.variants) {
        const theirs = buildVariantName(variant.name, name);
        const config = quotaVariantConfig(name, variant);
        await addGateway(theirs, () => this.startGateway(`gateway-${theirs}${suffix}`, [], variant.cli, config, upstreamUrl));
      }
    }
    if (want.has(MANY_KEYS_WRK_TARGET)) {
      await addGateway(MANY_KEYS_WRK_TARGET, () =>
        this.startGateway(`gateway-${MANY_KEYS_WRK_TARGET}${suffix}`, [], CLI, undefined, upstreamUrl),
      );
      list.at(-1)!.rotateKeys = await this.manyKeysOf(options);
      // Each --compare/--variant build too (<build>-2000-keys): its Redis CPU per request in the same rounds.
      for (const variant of options.variants) {
        const theirs = manyKeysBuildName(variant.name);
        await addGateway(theirs, () => this.startGateway(`gateway-${theirs}${suffix}`, [], variant.cli, undefined, upstreamUrl));
        list.at(-1)!.rotateKeys = await this.manyKeysOf(options);
      }
    }
    for (const name of TRACE_TARGET_NAMES) {
      if (!want.has(name)) continue;
      const env = traceEnv(name, await this.otlpSink());
      await addGateway(name, () => this.startGateway(`gateway-${name}${suffix}`, [], CLI, undefined, upstreamUrl, env));
    }
    for (const variant of options.variants)
      await addGateway(variant.name, () => this.startGateway(`gateway-${variant.name}${suffix}`, [], variant.cli, undefined, upstreamUrl));
    if (want.has(CACHE_TARGET)) {
      // In front of plain, a twin of the plain upstream that allows caching (./cache-target.ts).
      const via =
        upstream === 'plain'
          ? await this.startPlainUpstream(`plain-upstream-${CACHE_TARGET}`, { BENCH_CACHE_CONTROL: CACHE_CONTROL })
          : undefined;
      const config = cacheConfig(via?.url ?? upstreamUrl, PATH, suffix);
      await addGateway(CACHE_TARGET, () => this.startGateway(`gateway-${CACHE_TARGET}${suffix}`, [], CLI, config, upstreamUrl));
      list.at(-1)!.via = via;
    }
    for (const name of POST_TARGET_NAMES) {
      if (!want.has(name) || upstream !== 'plain') continue;
      const config = postConfig(name, upstreamUrl, PATH, suffix);
      await addGateway(name, () => this.startGateway(`gateway-${name}${suffix}`, [], CLI, config, upstreamUrl));
      list.at(-1)!.request = POST_REQUEST;
    }
    if (want.has(EDGE_RULES_TARGET)) {
      const config = edgeRulesConfig(`${EDGE_RULES_TARGET}${suffix}`, PATH, upstreamUrl);
      await addGateway(EDGE_RULES_TARGET, () => this.startGateway(`gateway-${EDGE_RULES_TARGET}${suffix}`, [], CLI, config, upstreamUrl));
      for (const variant of options.variants) {
        const name = `${variant.name}-edge-rules`;
        const theirs = edgeRulesConfig(`${name}${suffix}`.replace(/[^\w.-]/g, '_'), PATH, upstreamUrl, variant.cli);
        await addGateway(name, () => this.startGateway(`gateway-${name}${suffix}`, [], variant.cli, theirs, upstreamUrl));
      }
    }
    if (want.has(POLICY_TARGET)) {
      const config = policyConfig(`${POLICY_TARGET}${suffix}`);
      await addGateway(POLICY_TARGET, () => this.startGateway(`gateway-${POLICY_TARGET}${suffix}`, [], CLI, config, upstreamUrl));
      for (const variant of options.variants) {
        const name = `${variant.name}-policies`;
        const theirs = policyConfig(`${name}${suffix}`.replace(/[^\w.-]/g, '_'), variant.cli);
        await addGateway(name, () => this.startGateway(`gateway-${name}${suffix}`, [], variant.cli, theirs, upstreamUrl));
      }
    }
    if (want.has(SPREAD_TARGET)) {
      const urls = [upstreamUrl];
      for (let i = 2; i <= SPREAD_INSTANCES; i++) urls.push(await this.startInstance(upstream, `${upstream}-upstream-${i}`));
      const config = spreadConfig(urls, PATH, suffix);
      await addGateway(SPREAD_TARGET, () => this.startGateway(`gateway-${SPREAD_TARGET}${suffix}`, [], CLI, config, upstreamUrl));
      list.at(-1)!.spreadUrls = urls;
    }
    return list;
  }

  /** Another instance of an upstream's program, for `tollgate-3-targets`; its URL. */
  private async startInstance(upstream: UpstreamName, name: string): Promise<string> {
    if (upstream === 'plain') return this.spawn(name, [peer('plain-upstream.ts')], {}, TS).listening('plain upstream');
    const port = await freePort();
    const process = this.spawn(name, [CLI, 'backend'], { BACKEND_PORT: String(port), LOG_LEVEL: 'warn' });
    await process.accepting(port);
    return `http://127.0.0.1:${port}`;
  }

  get backendPid(): number {
    return this.backend.pid;
  }

  /** The upstreams of the run: the plain Node one first when it runs, then the bundled backend. */
  upstreams(): Upstream[] {
    return this.upstreamList;
  }

  /** Every target in front of the bundled backend, in round order (bare first). */
  targets(): Target[] {
    return this.all;
  }

  /** Every target in front of one upstream, in round order. */
  targetsFor(upstream: UpstreamName): Target[] {
    return upstream === 'plain' ? this.plain : this.all;
  }

  /** The TLS twins in front of one upstream (--transport tls or h2), bare first. */
  tlsTargetsFor(upstream: UpstreamName): Target[] {
    return this.tls.get(upstream) ?? [];
  }

  /** How many connections an upstream has accepted, and requests it has received, so far. */
  async upstreamCounts(upstream: Upstream): Promise<{ accepted: number; requests: number }> {
    const res = await fetch(upstream.connectionsUrl);
    return (await res.json()) as { accepted: number; requests: number };
  }

  target(name: string): Target | undefined {
    return this.all.find((t) => t.name === name);
  }

  /** The tollgate build of this checkout, Redis mode: what the single-target phases measure. */
  get tollgate(): Target {
    const target = this.target('tollgate');
    if (!target) throw new Error('this phase needs the tollgate target');
    return target;
  }

  get bare(): Target {
    const target = this.target('bare');
    if (!target) throw new Error('this phase needs the bare target');
    return target;
  }

  startBare(name: string, execArgv: string[] = [], upstreamUrl = this.backendUrl, env: Record<string, string> = {}): NodeProcess {
    return this.spawn(name, [peer('bare-proxy.ts'), upstreamUrl, this.keyId, 'enterprise'], env, [...TS, ...execArgv]);
  }

  private startPeer(name: string, file: string, upstreamUrl: string): NodeProcess {
    return this.spawn(name, [peer(file), upstreamUrl], { REDIS_URL: this.redis.url }, TS);
  }

  /** A gateway with its full default policy; LOG_LEVEL=info, so the access log is part of the cost. */
  startGateway(
    name: string,
    execArgv: string[] = [],
    cli = CLI,
    configDir = resolve(dirname(cli), '../../config'),
    upstreamUrl = this.backendUrl,
    extraEnv: Record<string, string> = {},
  ): NodeProcess {
    // Another build reads its own config/ by default (its schema may differ from this checkout's).
    const env = {
      TOLLGATE_CONFIG_DIR: configDir,
      REDIS_URL: this.redis.url,
      UPSTREAM_URL: upstreamUrl,
      GATEWAY_PORT: '0',
      ADMIN_PORT: '0',
      LOG_LEVEL: 'info',
      ...extraEnv,
    };
    return this.spawn(name, [cli, 'gateway'], env, [...this.gatewayNodeArgs, ...execArgv]);
  }

  /** The OTLP receiver the tracing targets export to (bench/peers/otlp-sink.ts), started once, on first use. */
  private otlpSink(): Promise<string> {
    this.sink ??= this.spawn('otlp-sink', [peer('otlp-sink.ts')], {}, TS).listening('otlp sink');
    return this.sink;
  }

  /** The same gateway on the embedded (in-memory) store, with the run's key seeded. */
  private startEmbedded(name: string, apiKey: string, upstreamUrl: string): NodeProcess {
    const env = { UPSTREAM_URL: upstreamUrl, GATEWAY_PORT: '0', ADMIN_PORT: '0', LOG_LEVEL: 'info', BENCH_API_KEY: apiKey };
    return this.spawn(name, [peer('embedded-tollgate.ts'), REPO_ROOT], env, [...TS, ...this.gatewayNodeArgs]);
  }

  private spawn(name: string, args: string[], env: Record<string, string>, execArgv: string[] = []): NodeProcess {
    // startTollgate with the script as its CLI: every process gets the same base environment.
    const [script, ...rest] = args;
    const proc = startTollgate(rest, { ...env, ...this.secretEnv }, { cli: script, execArgv, logFile: logFileOf(name), name });
    this.processes.push(proc);
    return proc;
  }

  /** Throws, with its log, if a process of the run has ended: later figures would be meaningless. */
  assertRunning(): void {
    for (const proc of this.processes) {
      if (proc.exitStatus !== null && !this.stopped.has(proc)) {
        throw new Error(
          `${proc.name} (pid ${proc.pid}) exited with ${proc.exitStatus} during the run; its log ends:\n${proc.outputTail()}`,
        );
      }
    }
  }

  /** Stops one process of the run on purpose (a profiled one). */
  /** A new process in place of a tollgate target's (--restart): stopped, started again, its URLs renewed. */
  async restart(target: Target): Promise<void> {
    if (!target.startAgain) return;
    await this.stop(target.process);
    target.process = target.startAgain();
    target.url = await target.process.listening('gateway');
    target.adminUrl = await target.process.listening('admin').catch(() => undefined);
  }

  async stop(proc: NodeProcess): Promise<void> {
    this.stopped.add(proc);
    await proc.stop('SIGTERM', 15_000);
  }

  /** Empties the log files (gateways write one line per request). */
  truncateLogs(): void {
    for (const target of [...this.all, ...this.plain, ...[...this.tls.values()].flat()]) target.process.truncateLog();
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.processes.map((p) => p.stop('SIGTERM', 15_000)));
    this.admin.disconnect();
    await this.redis.stop();
    await (await this.issuer)?.close();
  }

  /** The keys `tollgate-2000-keys` sends in turn (--wrk-keys of them), written once per run: every phase and process sends the same ones. */
  manyKeysOf(options: Pick<Options, 'wrkKeys'>): Promise<string[]> {
    return (this.manyKeys ??= createKeysInBulk(this.admin, options.wrkKeys, 'enterprise'));
  }

  /** The credential headers a target is called with: its own (a JWT), or the run's API key. */
  headersOf(target: Target): Record<string, string> {
    return target.headers ?? this.headers;
  }
}
