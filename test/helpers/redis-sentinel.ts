import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from './ports.js';
import { TestRedis } from './redis-server.js';

/**
 * A master, one replica and one Sentinel watching them (quorum 1), all of the test's own.
 * `failover()` asks the Sentinel to promote the replica, as an operator (or a crash) would.
 */
export class TestRedisSentinel {
  private constructor(
    readonly master: TestRedis,
    readonly replica: TestRedis,
    readonly sentinelPort: number,
    private readonly sentinel: ChildProcess,
    private readonly dir: string,
  ) {}

  static readonly MASTER_NAME = 'tollgate';

  /** `replicaLink`: the port the replica reaches the master at (a fault proxy's; default: the master's own). */
  static async start(replicaLink?: (masterPort: number) => Promise<number>): Promise<TestRedisSentinel> {
    const master = await TestRedis.start();
    const linkPort = replicaLink ? await replicaLink(master.port) : master.port;
    const replica = await TestRedis.start(['--replicaof', '127.0.0.1', String(linkPort)]);
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-sentinel-'));
    const port = await freePort();
    const conf = join(dir, 'sentinel.conf');
    writeFileSync(
      conf,
      [
        `port ${port}`,
        'bind 127.0.0.1',
        `dir ${dir}`,
        `sentinel monitor ${TestRedisSentinel.MASTER_NAME} 127.0.0.1 ${master.port} 1`,
        `sentinel down-after-milliseconds ${TestRedisSentinel.MASTER_NAME} 1000`,
        // (Through a link of its own the replica names another master port than the Sentinel's:
        // Sentinel "fixes" such a replica after failover-timeout. Long enough not to, in a test.)
        `sentinel failover-timeout ${TestRedisSentinel.MASTER_NAME} ${replicaLink ? 120_000 : 5000}`,
        '',
      ].join('\n'),
    );
    const sentinel = spawn('redis-server', [conf, '--sentinel'], { stdio: 'ignore' });
    const set = new TestRedisSentinel(master, replica, port, sentinel, dir);
    await set.waitFor(
      async (s) =>
        (await s.call('SENTINEL', 'REPLICAS', TestRedisSentinel.MASTER_NAME)) instanceof Array &&
        ((await s.call('SENTINEL', 'REPLICAS', TestRedisSentinel.MASTER_NAME)) as unknown[]).length > 0,
    );
    return set;
  }

  get env(): Record<string, string> {
    return { REDIS_SENTINELS: `127.0.0.1:${this.sentinelPort}`, REDIS_SENTINEL_MASTER: TestRedisSentinel.MASTER_NAME };
  }

  async masterPort(): Promise<number> {
    const s = this.client();
    try {
      const [, port] = (await s.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', TestRedisSentinel.MASTER_NAME)) as [string, string];
      return Number(port);
    } finally {
      s.disconnect();
    }
  }

  /** Promotes the replica; resolves once the Sentinel names it as the master. */
  async failover(): Promise<void> {
    const s = this.client();
    try {
      await s.call('SENTINEL', 'FAILOVER', TestRedisSentinel.MASTER_NAME);
    } finally {
      s.disconnect();
    }
    const deadline = Date.now() + 15_000;
    while ((await this.masterPort()) !== this.replica.port) {
      if (Date.now() > deadline) throw new Error('sentinel failover did not happen');
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async stop(): Promise<void> {
    this.sentinel.kill('SIGKILL');
    await Promise.all([this.master.stop(), this.replica.stop()]);
    rmSync(this.dir, { recursive: true, force: true });
  }

  private client(): Redis {
    return new Redis(this.sentinelPort, '127.0.0.1', { maxRetriesPerRequest: 1 });
  }

  private async waitFor(ready: (sentinel: Redis) => Promise<boolean>): Promise<void> {
    const deadline = Date.now() + 15_000;
    for (;;) {
      const s = new Redis(this.sentinelPort, '127.0.0.1', { lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
      s.on('error', () => {});
      try {
        await s.connect();
        if (await ready(s)) return;
      } catch {
        // not up yet
      } finally {
        s.disconnect();
      }
      if (Date.now() > deadline) throw new Error('sentinel did not see the replica');
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
