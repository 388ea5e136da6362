import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from './free-port.js';
import { waitForRedis } from './wait-for-redis.js';

/**
 * A real redis-server of our own on a free port, without persistence, in a temporary directory of
 * its own: tests and the benchmark can kill, pause and restart it without touching any other Redis
 * on the machine (never the one on 6379).
 */
export class RedisServer {
  private child: ChildProcess | undefined;
  readonly dir = mkdtempSync(join(tmpdir(), 'tollgate-redis-'));

  private constructor(
    readonly port: number,
    private readonly extraArgs: string[],
    private readonly logFile: string | undefined,
  ) {}

  /** `extraArgs` go to redis-server as given; with `logFile` its log goes there (else nowhere). */
  static async start(extraArgs: string[] = [], options: { logFile?: string } = {}): Promise<RedisServer> {
    // A free port is free only a moment: another file's process may take it before ours binds it
    // (then ours exits, and that one's PING would pass for ours). Another port then, a few times.
    for (let attempt = 1; ; attempt++) {
      const redis = new RedisServer(await freePort(), extraArgs, options.logFile);
      try {
        await redis.launch();
        return redis;
      } catch (err) {
        await redis.stop();
        if (attempt >= 5) throw err;
      }
    }
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get pid(): number {
    return this.child!.pid!;
  }

  /** Starts (or, after `kill`, restarts) the server on the same port and waits for PING. */
  async launch(): Promise<void> {
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.dir];
    if (this.logFile) args.push('--logfile', this.logFile);
    const child = spawn('redis-server', [...args, ...this.extraArgs], { stdio: 'ignore' });
    this.child = child;
    // Its own answer: a server that could not bind exits, and another's on the port does not count.
    await waitForRedis(this.url, 60_000, { pid: child.pid, gone: () => child.exitCode !== null || child.signalCode !== null });
  }

  /** A client for fixtures, assertions and counters (never the one the code under test uses). */
  client(): Redis {
    return new Redis(this.url, { maxRetriesPerRequest: 1, lazyConnect: false });
  }

  async flush(): Promise<void> {
    const client = this.client();
    await client.flushall();
    client.disconnect();
  }

  pause(): void {
    this.child?.kill('SIGSTOP');
  }

  resume(): void {
    this.child?.kill('SIGCONT');
  }

  /** Kills the server at once (a crash); `launch` brings it back. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGCONT');
    child.kill('SIGKILL');
    await exited;
  }

  async stop(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
