import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { createKeyWithCli } from './keys.js';
import type { Options } from './options.js';
import { BenchProcess, BenchRedis, CLI, freePort, REPO_ROOT } from './processes.js';

export const PATH = '/v1/categories';

/** A proxy under test: the bare proxy, tollgate, or another build of tollgate (a variant). */
export interface Target {
  name: string;
  url: string;
  process: BenchProcess;
  /** Tollgate builds talk to Redis; the bare proxy does not. */
  usesRedis: boolean;
  /** Tollgate's admin listener (/metrics), if it logged one. */
  adminUrl?: string;
}

/**
 * Everything a run needs, each in its own process: a redis-server, the category backend as the
 * upstream, the bare proxy, the gateway (and any variants), and an API key created with the CLI.
 */
export class Stack {
  private readonly processes: BenchProcess[] = [];
  private readonly stopped = new Set<BenchProcess>();
  readonly admin: Redis;
  backendUrl = '';
  keyId = '';
  headers: Record<string, string> = {};
  bare!: Target;
  tollgate!: Target;
  variants: Target[] = [];
  // Gateway, backend and bare proxy share an assertion secret of this run's own.
  private readonly secretEnv = { TOLLGATE_ASSERTION_SECRET: randomBytes(48).toString('base64') };
  private gatewayNodeArgs: string[] = [];

  private constructor(readonly redis: BenchRedis) {
    this.admin = redis.client();
  }

  static async start(options: Options): Promise<Stack> {
    const stack = new Stack(await BenchRedis.start());
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
    const { id, key } = await createKeyWithCli(this.redis.url, ['--plan', 'enterprise', '--per-minute', '100000000', '--per-day', '1000000000']);
    this.keyId = id;
    this.headers = { authorization: `Bearer ${key}` };

    // The upstream: the bundled category backend, in memory (REDIS_URL unset). Its own request log
    // is off (warn): it is the same work behind both proxies and would only blur the ratio. With
    // no info lines there is no "backend listening" line to read the port from: it is picked here.
    const backendPort = await freePort();
    const backend = this.spawn('backend', [CLI, 'backend'], { BACKEND_PORT: String(backendPort), LOG_LEVEL: 'warn' });
    this.backendUrl = `http://127.0.0.1:${backendPort}`;
    await backend.accepting(backendPort);

    const bare = this.startBare('bare-proxy');
    this.bare = { name: 'bare', url: await bare.listening('bare proxy listening'), process: bare, usesRedis: false };
    const gateway = this.startGateway('gateway');
    const url = await gateway.listening('gateway listening');
    const adminUrl = await gateway.listening('admin listening').catch(() => undefined);
    this.tollgate = { name: 'tollgate', url, process: gateway, usesRedis: true, adminUrl };
    for (const variant of options.variants) {
      const proc = this.startGateway(`gateway-${variant.name}`, [], variant.cli);
      this.variants.push({ name: variant.name, url: await proc.listening('gateway listening'), process: proc, usesRedis: true });
    }
  }

  get backendPid(): number {
    return this.processes[0]!.pid;
  }

  /** The bare proxy and every tollgate build, bare first. */
  targets(): Target[] {
    return [this.bare, this.tollgate, ...this.variants];
  }

  startBare(name: string, execArgv: string[] = []): BenchProcess {
    return this.spawn(name, [join(REPO_ROOT, 'dist/bench/bare-proxy.js'), this.backendUrl, this.keyId, 'enterprise'], {}, execArgv);
  }

  /** A gateway with its full default policy; LOG_LEVEL=info, so the access log is part of the cost. */
  startGateway(name: string, execArgv: string[] = [], cli = CLI): BenchProcess {
    const env = { REDIS_URL: this.redis.url, UPSTREAM_URL: this.backendUrl, GATEWAY_PORT: '0', ADMIN_PORT: '0', LOG_LEVEL: 'info' };
    return this.spawn(name, [cli, 'gateway'], env, [...this.gatewayNodeArgs, ...execArgv]);
  }

  private spawn(name: string, args: string[], env: Record<string, string>, execArgv: string[] = []): BenchProcess {
    const proc = BenchProcess.spawn(name, args, { ...env, ...this.secretEnv }, execArgv);
    this.processes.push(proc);
    return proc;
  }

  /** Throws, with its log, if a process of the run has ended: later figures would be meaningless. */
  assertRunning(): void {
    for (const proc of this.processes) {
      if (proc.exited !== null && !this.stopped.has(proc)) {
        throw new Error(`${proc.name} (pid ${proc.pid}) exited with ${proc.exited} during the run; its log ends:\n${proc.logTail()}`);
      }
    }
  }

  /** Stops one process of the run on purpose (a profiled one). */
  async stop(proc: BenchProcess): Promise<void> {
    this.stopped.add(proc);
    await proc.stop();
  }

  /** Empties the gateways' log files (they grow by one line per request). */
  truncateLogs(): void {
    for (const target of [this.tollgate, ...this.variants]) target?.process.truncateLog();
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.processes.map((p) => p.stop()));
    this.admin.disconnect();
    await this.redis.stop();
  }
}
