import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clusterSubscription, connectRedis, whenReady, type RedisClient } from '../../src/store/redis/connect.js';
import { Subscriptions, type ChannelListener } from '../../src/store/redis/subscriptions.js';
import { TestRedisCluster } from '../helpers/redis-cluster.js';

// The subscriber heartbeat on a Redis Cluster: the node the subscriptions live on hangs without
// closing (SIGSTOP), which sends no node event. The heartbeat notices it within seconds (not at the
// key cache's TTL), reports a gap, and the subscriptions move to another node, where messages are
// heard again.

let cluster: TestRedisCluster;
let main: RedisClient;

beforeAll(async () => {
  cluster = await TestRedisCluster.start(3);
  main = connectRedis({ clusterNodes: cluster.addresses }, 'gateway');
  await whenReady(main, 20_000);
}, 120_000);

afterAll(async () => {
  for (const node of cluster?.nodes ?? []) node.resume();
  main?.disconnect();
  await cluster?.stop();
});

async function until(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within 30 s: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('cluster subscriptions', () => {
  it('notices a subscription node that hangs without closing, reports the gap and listens on another node', async () => {
    const subscriptions = new Subscriptions(main, 200);
    const heard: string[] = [];
    let gaps = 0;
    const listener: ChannelListener = { message: (m) => heard.push(m), gap: () => gaps++ };
    const subscription = subscriptions.listen('tg:test-cluster-silent', listener);
    await subscription.ready;
    const publishers = cluster.nodes.map((node) => new Redis(node.port, '127.0.0.1', { maxRetriesPerRequest: 0, commandTimeout: 500 }));
    for (const publisher of publishers) publisher.on('error', () => {});
    // PUBLISH through any node that answers: the cluster bus carries it to every other.
    const publish = async (message: string) => {
      for (const publisher of publishers) if (await publisher.publish('tg:test-cluster-silent', message).catch(() => false)) return;
    };
    try {
      await until(async () => {
        await publish('before');
        return heard.includes('before');
      }, 'a message before the fault');
      const subscribed = clusterSubscription((subscriptions as unknown as { subscriber: import('ioredis').Cluster }).subscriber);
      const hung = cluster.nodes.find((node) => node.port === subscribed?.options.port);
      expect(hung).toBeDefined();
      const gapsBefore = gaps;
      hung!.pause();
      try {
        await until(() => gaps > gapsBefore, 'a gap after the subscription node hung');
        await until(async () => {
          await publish('after');
          return heard.includes('after');
        }, 'a message on the new subscription node');
      } finally {
        hung!.resume();
      }
    } finally {
      subscription.stop();
      for (const publisher of publishers) publisher.disconnect();
    }
  }, 120_000);
});
