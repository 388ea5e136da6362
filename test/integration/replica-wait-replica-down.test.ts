import { afterEach, describe, expect, it } from 'vitest';
import { rmSync } from 'node:fs';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { pollUntil } from '../helpers/poll.js';
import { dayCountIn, replicaOf, TestRedis } from '../helpers/redis-server.js';
import { percentiles, requestLoops, sleep } from '../helpers/request-loops.js';
import { configCopy, createKey, startGateway, withLeases, type GatewayHandle } from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// quota.waitForReplica while no replica acknowledges (none configured, or one stopped with SIGSTOP):
// every WAIT times out. A replica's outage must not become the gateway's: every request is still
// answered as the master decided (200 here, the quota being large), none shed as 503 because the
// turns' decisions queued behind the WAITs, and the master counts exactly what was admitted.
// (The turns' WAITs once went out on the decisions' own connection, where each blocked the next
// turn's calls: turn N waited N × timeoutMs, and past redis.commandTimeoutMs they were shed.)
// Leases off: each request is one decision on Redis. The figures are printed for docs/operations.md.

const LOOPS = 16;
const RUN_MS = 3000;

let stack: { servers: TestRedis[]; upstream: EchoUpstream; gateway?: GatewayHandle; configDir: string } | undefined;

afterEach(async () => {
  await stack?.gateway?.process.stop();
  await stack?.upstream.stop();
  for (const server of stack?.servers ?? []) {
    server.resume();
    await server.stop();
  }
  if (stack) rmSync(stack.configDir, { recursive: true, force: true });
  stack = undefined;
});

/** A gateway with waitForReplica { replicas: 1, timeoutMs: 50 } and leases off on `master`, and a key with a large quota. */
async function start(master: TestRedis, servers: TestRedis[]) {
  const upstream = await new EchoUpstream().start();
  const configDir = configCopy({
    'gateway.yaml': (yaml) =>
      withLeases(false)(yaml.replace(/# waitForReplica: \{[^}]*\}/, 'waitForReplica: { replicas: 1, timeoutMs: 50 }')),
  });
  stack = { servers, upstream, configDir };
  stack.gateway = await startGateway({ REDIS_URL: master.url, UPSTREAM_URL: upstream.url, TOLLGATE_CONFIG_DIR: configDir });
  const key = await createKey(master, ['--plan', 'free', '--per-minute', '1000000', '--per-day', '10000000']);
  return { gateway: stack.gateway, key };
}

describe('quota.waitForReplica with no replica acknowledging', () => {
  it('answers every request of 16 keep-alive loops with no replica at all, and counts exactly what it admitted', async () => {
    const master = await TestRedis.start();
    const { gateway, key } = await start(master, [master]);
    await awayFromDayEdge(60);
    const loops = requestLoops([gateway.url], key.key, LOOPS);
    await sleep(RUN_MS);
    const tally = await loops.stop();
    const admitted = tally.statuses.get(200) ?? 0;
    const counted = await dayCountIn(master, key.id);
    console.log(
      `no replica: ${[...tally.statuses].map(([s, n]) => `${n}×${s}`).join(', ')}; ${percentiles(tally.waitsMs)}; ` +
        `admitted ${admitted}, day count ${counted}`,
    );
    expect(tally.unanswered).toBe(0);
    expect([...tally.statuses.keys()]).toEqual([200]);
    expect(counted).toBe(admitted);
  }, 120_000);

  it('answers every request while its replica is stopped (SIGSTOP) and after it resumes, and counts exactly what it admitted', async () => {
    const master = await TestRedis.start();
    const replica = await replicaOf(master);
    const { gateway, key } = await start(master, [master, replica]);
    await awayFromDayEdge(60);
    const loops = requestLoops([gateway.url], key.key, LOOPS);
    await sleep(RUN_MS / 3);
    const healthy = loops.tally.waitsMs.length;
    replica.pause();
    await sleep(RUN_MS / 3);
    const stopped = loops.tally.waitsMs.length;
    replica.resume();
    await sleep(RUN_MS / 3);
    const tally = await loops.stop();
    const admitted = tally.statuses.get(200) ?? 0;
    const counted = await dayCountIn(master, key.id);
    console.log(
      `replica stopped mid-run: ${[...tally.statuses].map(([s, n]) => `${n}×${s}`).join(', ')}; ` +
        `healthy ${percentiles(tally.waitsMs.slice(0, healthy))}, stopped ${percentiles(tally.waitsMs.slice(healthy, stopped))}, ` +
        `resumed ${percentiles(tally.waitsMs.slice(stopped))}; admitted ${admitted}, day count ${counted}`,
    );
    expect(tally.unanswered).toBe(0);
    expect([...tally.statuses.keys()]).toEqual([200]);
    expect(counted).toBe(admitted);
    // The resumed replica catches up on every write.
    const replicated = await pollUntil(
      () => dayCountIn(replica, key.id),
      (count) => count === admitted,
      { deadline: Date.now() + 30_000 },
    );
    expect(replicated).toBe(admitted);
  }, 120_000);
});
