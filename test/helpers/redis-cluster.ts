import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Cluster, Redis } from 'ioredis';
import { TestRedis } from './redis-server.js';

const run = promisify(execFile);

/**
 * A real Redis Cluster of the test's own: `masters` redis-server processes started with
 * --cluster-enabled on free ports, joined by `redis-cli --cluster create` (no replicas), ready
 * when every node reports cluster_state:ok.
 */
export class TestRedisCluster {
  private constructor(readonly nodes: TestRedis[]) {}

  static async start(masters = 3): Promise<TestRedisCluster> {
    const nodes = await Promise.all(
      Array.from({ length: masters }, () =>
        // nodes.conf is relative to the node's --dir (its own temporary directory).
        TestRedis.start(['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '2000']),
      ),
    );
    const cluster = new TestRedisCluster(nodes);
    try {
      await run('redis-cli', ['--cluster', 'create', ...cluster.addresses, '--cluster-replicas', '0', '--cluster-yes'], {
        timeout: 20_000,
      });
      await cluster.waitForState('ok');
    } catch (err) {
      await cluster.stop();
      throw err;
    }
    return cluster;
  }

  get addresses(): string[] {
    return this.nodes.map((n) => `127.0.0.1:${n.port}`);
  }

  /** What a tollgate process needs to use this cluster (and no REDIS_URL). */
  get env(): Record<string, string> {
    return { REDIS_CLUSTER_NODES: this.addresses.join(',') };
  }

  /** A cluster client for assertions and fixtures (never used by the code under test). */
  client(): Cluster {
    return new Cluster(
      this.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })),
      { redisOptions: { maxRetriesPerRequest: 1 } },
    );
  }

  /** The port of the master that serves `key`'s hash slot. */
  async masterPortOf(key: string): Promise<number> {
    const probe = new Redis(this.nodes[0]!.port, '127.0.0.1', { maxRetriesPerRequest: 1 });
    try {
      const slot = Number(await probe.call('CLUSTER', 'KEYSLOT', key));
      const ranges = (await probe.call('CLUSTER', 'SLOTS')) as Array<[number, number, [string, number, ...unknown[]]]>;
      const range = ranges.find(([from, to]) => slot >= from && slot <= to);
      if (!range) throw new Error(`slot ${slot} is not served`);
      return Number(range[2][1]);
    } finally {
      probe.disconnect();
    }
  }

  async waitForState(state: 'ok' | 'fail', timeoutMs = 15_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const states = await Promise.all(this.nodes.map((n) => clusterState(n.port)));
      if (states.every((s) => s === state)) return;
      if (Date.now() > deadline) throw new Error(`cluster did not reach cluster_state:${state} (${states.join(', ')})`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.stop()));
  }
}

async function clusterState(port: number): Promise<string> {
  const client = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
  client.on('error', () => {});
  try {
    await client.connect();
    const info = String(await client.call('CLUSTER', 'INFO'));
    return /cluster_state:(\w+)/.exec(info)?.[1] ?? 'unknown';
  } catch {
    return 'down';
  } finally {
    client.disconnect();
  }
}
