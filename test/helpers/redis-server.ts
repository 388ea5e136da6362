import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { waitForRedis } from '../../src/dev/wait-for-redis.js';
import { freePort } from './ports.js';

/**
 * A real redis-server of the test's own, on a free port, so a test can kill, pause and restart it
 * without touching any other Redis on the machine.
 */
export class TestRedis {
  private child: ChildProcess | undefined;
  readonly dir = mkdtempSync(join(tmpdir(), 'tollgate-redis-'));

  private constructor(readonly port: number, private readonly extraArgs: string[]) {}

  static async start(extraArgs: string[] = []): Promise<TestRedis> {
    const redis = new TestRedis(await freePort(), extraArgs);
    await redis.launch();
    return redis;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async launch(): Promise<void> {
    this.child = spawn(
      'redis-server',
      ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.dir, ...this.extraArgs],
      { stdio: 'ignore' },
    );
    await waitForRedis(this.url);
  }

  /** A client for assertions and fixtures (never used by the code under test). */
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

  async kill(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
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
