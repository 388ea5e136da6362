import { Redis } from 'ioredis';

/**
 * Waits until a freshly started redis-server answers PING (tests and the benchmark start their own).
 * With `own.pid`, only that process's answer counts: a port found free a moment ago may have been
 * taken by another file's redis-server since, and its PING would pass for ours (redis-server.ts);
 * `own.gone` says that process has exited (it could not bind), which ends the wait at once.
 */
export async function waitForRedis(url: string, timeoutMs = 60_000, own: { pid?: number; gone?: () => boolean } = {}): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (own.gone?.()) throw new Error(`the redis-server for ${url} exited before it answered`);
    const client = new Redis(url, { lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
    client.on('error', () => {});
    let answering: number | undefined;
    try {
      await client.connect();
      if ((await client.ping()) === 'PONG') {
        if (own.pid === undefined) return;
        answering = Number(/^process_id:(\d+)/m.exec(await client.info('server'))?.[1]);
        if (answering === own.pid) return;
      }
    } catch {
      // not up yet
    } finally {
      client.disconnect();
    }
    if (answering !== undefined) throw new Error(`${url} is answered by another redis-server (pid ${answering}, not ${own.pid})`);
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`redis-server at ${url} did not start`);
}
