import { Redis } from 'ioredis';
import { createServer, connect, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { Subscriptions, type ChannelListener } from '../../src/store/redis/subscriptions.js';
import { redisForFile } from '../helpers/redis-for-file.js';

// One subscriber connection for every channel a process listens on (src/store/redis/subscriptions.ts),
// on a real redis-server: messages reach each channel's listeners, a lost connection is a gap for
// every channel and is subscribed again, and the connection closes with the last listener.

const redis = redisForFile();

function recorder(): ChannelListener & { messages: string[]; gaps: number } {
  const r = { messages: [] as string[], gaps: 0, message: (m: string) => r.messages.push(m), gap: () => r.gaps++ };
  return r;
}

/** Until `check` holds (pub/sub is asynchronous; 20 s at most, whatever the machine's load). */
async function until(check: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('not within 20 s');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const subscriberConnections = async () =>
  ((await redis.client().call('CLIENT', 'LIST', 'TYPE', 'pubsub')) as string).split('\n').filter((l) => l.includes('name=')).length;

describe('shared subscriptions', () => {
  it('share one connection, survive its loss with a gap for every channel, and close with the last listener', async () => {
    const main = redis.client().duplicate();
    const subscriptions = new Subscriptions(main);
    const [a, b, c] = [recorder(), recorder(), recorder()];
    const stopA = subscriptions.listen('tg:test-a', a).stop;
    const stopB = subscriptions.listen('tg:test-b', b).stop;
    const stopC = subscriptions.listen('tg:test-b', c).stop;
    // A subscription taking effect is a gap: anything published before it was missed.
    await until(() => a.gaps > 0 && b.gaps > 0);
    expect(await subscriberConnections()).toBe(1);

    await redis.client().publish('tg:test-a', 'one');
    await redis.client().publish('tg:test-b', 'two');
    await until(() => a.messages.length === 1 && b.messages.length === 1 && c.messages.length === 1);
    expect([a.messages, b.messages, c.messages]).toEqual([['one'], ['two'], ['two']]);

    const gapsBefore = [a.gaps, b.gaps, c.gaps];
    await redis.client().call('CLIENT', 'KILL', 'TYPE', 'pubsub');
    await until(() => a.gaps > gapsBefore[0]! && b.gaps > gapsBefore[1]! && c.gaps > gapsBefore[2]!);
    // Subscribed again: messages flow on both channels.
    await until(async () => {
      await redis.client().publish('tg:test-a', 'again');
      await redis.client().publish('tg:test-b', 'again');
      return a.messages.includes('again') && b.messages.includes('again');
    });

    stopA();
    stopB();
    expect(await subscriberConnections()).toBe(1);
    stopC();
    await until(async () => (await subscriberConnections()) === 0);
    main.disconnect();
  });

  it('reconnects a subscriber whose connection went silent (no FIN, no reply), and reports the gap', async () => {
    const proxy = await silentProxy(redis.server().port);
    const main = new Redis({ host: '127.0.0.1', port: proxy.port, maxRetriesPerRequest: 1 });
    const subscriptions = new Subscriptions(main, 200);
    const listener = recorder();
    const stop = subscriptions.listen('tg:test-silent', listener).stop;
    try {
      await until(() => listener.gaps > 0);
      // Every byte both ways is dropped on the connections open now; a new connection works.
      proxy.silenceOpenConnections();
      const gaps = listener.gaps;
      await until(() => listener.gaps > gaps);
      await until(async () => {
        await redis.client().publish('tg:test-silent', 'heard');
        return listener.messages.includes('heard');
      });
    } finally {
      stop();
      main.disconnect();
      proxy.close();
    }
  });
});

/** A TCP proxy to Redis whose open connections can be made silent: kept open, nothing passed on. */
async function silentProxy(targetPort: number) {
  const pairs: Array<{ client: Socket; upstream: Socket; silent: boolean }> = [];
  const server = createServer((client) => {
    const upstream = connect(targetPort, '127.0.0.1');
    const pair = { client, upstream, silent: false };
    pairs.push(pair);
    client.on('data', (chunk) => pair.silent || upstream.write(chunk));
    upstream.on('data', (chunk) => pair.silent || client.write(chunk));
    for (const socket of [client, upstream]) socket.on('error', () => {});
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    silenceOpenConnections: () => pairs.forEach((p) => (p.silent = true)),
    close: () => {
      server.close();
      for (const { client, upstream } of pairs) {
        client.destroy();
        upstream.destroy();
      }
    },
  };
}
