import { createRequire } from 'node:module';
import { Command, type Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { connectRedis } from '../../src/store/redis/connect.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { TurnCommands } from '../../src/store/redis/turn-commands.js';
import { TestRedis } from '../helpers/redis-server.js';

// TurnCommands (turn-commands.ts) writes a turn's script calls through ioredis's own defined-script
// command instead of a Pipeline, and so leans on ioredis internals: Commander.scriptsSet, Script's
// execute and its per-socket EVAL/EVALSHA choice, Redis.stream, Redis.sendCommand's timeout. These
// tests pin what it relies on against a real redis-server, so that an ioredis upgrade that changes
// any of it fails here by name rather than as wrong quota answers.

/** Echoes its call's number back: a string, a prefixed string and a number. */
const ECHO = `return {ARGV[1], 'rule-' .. ARGV[1], tonumber(ARGV[1])}`;

let server: TestRedis;
let fixture: Redis;
beforeAll(async () => {
  server = await TestRedis.start();
  fixture = server.client();
});
afterAll(async () => {
  fixture.disconnect();
  await server.stop();
});

/** A gateway's connection (connect.ts: no offline queue, a command timeout) with the echo script defined. */
async function gatewayConnection(name: string, commandTimeoutMs = 2000): Promise<Redis> {
  const redis = connectRedis(server.url, 'gateway', commandTimeoutMs) as Redis;
  redis.defineCommand('echo', { numberOfKeys: 1, lua: ECHO });
  // As the gateway does (start-gateway.ts): a lost connection is reported by the calls it fails.
  redis.on('error', () => undefined);
  if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
  await redis.client('SETNAME', name);
  return redis;
}

async function ready(redis: Redis): Promise<void> {
  if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
}

/** One turn of calls numbered from `from`: each settles with its reply, or its error's message. */
function turn(redis: Redis, from: number, calls: number): Promise<unknown[]> {
  const commands = new TurnCommands(redis);
  const replies: Array<Promise<unknown>> = [];
  for (let i = from; i < from + calls; i++) {
    replies.push(
      new Promise((resolve) =>
        commands.queue('echo', ['k', String(i), (err: Error | null, reply: unknown) => resolve(err ? `error ${err.message}` : reply)]),
      ),
    );
  }
  commands.send();
  return Promise.all(replies);
}

function expectOwn(replies: unknown[], from: number, errorsAllowed = false): number {
  let errors = 0;
  replies.forEach((reply, i) => {
    if (errorsAllowed && typeof reply === 'string' && reply.startsWith('error ')) return errors++;
    expect(reply, `call ${from + i}`).toEqual([String(from + i), `rule-${from + i}`, from + i]);
  });
  return errors;
}

async function commandCalls(name: 'eval' | 'evalsha'): Promise<number> {
  const stats = await fixture.info('commandstats');
  return Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
}

describe('a turn written without a Pipeline (ioredis internals it relies on)', () => {
  it('finds what it uses on the ioredis in node_modules', async () => {
    const version = (createRequire(import.meta.url)('ioredis/package.json') as { version: string }).version;
    // Written against 5.11: Script.execute(container, args, options, callback) with a per-socket
    // EVAL choice in its Command's toWritable. Read turn-commands.ts again before moving past 5.x.
    expect(version, 'ioredis major version').toMatch(/^5\./);
    const redis = await gatewayConnection('pin');
    const script = (redis.scriptsSet as Record<string, { execute?: unknown; Command?: { prototype: object } }>).echo;
    expect(typeof script?.execute, 'scriptsSet.echo.execute').toBe('function');
    expect(Object.getOwnPropertyNames(script!.Command!.prototype), 'Script Command overrides toWritable').toContain('toWritable');
    const stream = redis.stream as { cork?: unknown; uncork?: unknown; writable?: boolean };
    expect([typeof stream.cork, typeof stream.uncork, stream.writable]).toEqual(['function', 'function', true]);
    redis.disconnect();
  });

  it('refuses a call queued without its callback rather than sending it an argument short', async () => {
    const redis = await gatewayConnection('callback');
    expect(() => new TurnCommands(redis).queue('echo', ['k', '1'])).toThrow('echo queued without its callback');
    redis.disconnect();
  });

  it('sends EVAL once per connection and after SCRIPT FLUSH, EVALSHA otherwise, each call its own reply', async () => {
    const redis = await gatewayConnection('flush');
    const evals = await commandCalls('eval');
    const evalshas = await commandCalls('evalsha');
    expectOwn(await turn(redis, 0, 5), 0);
    expectOwn(await turn(redis, 5, 1), 5);
    expect([(await commandCalls('eval')) - evals, (await commandCalls('evalsha')) - evalshas]).toEqual([1, 5]);
    expect((redis.stream as unknown as { writableCorked: number }).writableCorked, 'left corked').toBe(0);

    await fixture.script('FLUSH');
    // Every call of the turn is told NOSCRIPT and sent again: the first as EVAL.
    expectOwn(await turn(redis, 100, 7), 100);
    expect((await commandCalls('eval')) - evals).toBe(2);
    expectOwn(await turn(redis, 200, 1), 200);
    expect((await commandCalls('eval')) - evals).toBe(2);
    redis.disconnect();
  });

  it('never hands a reply to another call when its connection is killed with calls in flight', async () => {
    const redis = await gatewayConnection('killed');
    let next = 0;
    for (let round = 0; round < 6; round++) {
      await ready(redis);
      const id = String(await redis.client('ID'));
      // Every other round the scripts are gone too: calls told NOSCRIPT are sent again as EVAL.
      if (round % 2 === 1) await fixture.script('FLUSH');
      const before: Array<Promise<number>> = [];
      const after: Array<Promise<number>> = [];
      for (let t = 0; t < 30; t++) {
        const from = next;
        const calls = 1 + (t % 5);
        next += calls;
        (t < 15 ? before : after).push(turn(redis, from, calls).then((replies) => expectOwn(replies, from, true)));
        // The connection kills itself behind the first 15 turns' calls, written at once (not
        // auto-pipelined): Redis runs those, reads the rest and closes without running them. (The
        // first 15's replies may or may not be read before the reset: each its own or an error.)
        if (t === 14)
          (redis.sendCommand(new Command('client', ['KILL', 'ID', id, 'SKIPME', 'no'])) as Promise<unknown>).catch(() => undefined);
      }
      await Promise.all(before);
      const failedAfter = (await Promise.all(after)).reduce((a, b) => a + b, 0);
      expect(failedAfter, `round ${round}: calls behind the kill`).toBe(after.length * 3);
    }
    await ready(redis);
    expectOwn(await turn(redis, next, 3), next);
    redis.disconnect();
  });

  it('times calls out with the command timeout, and the replies that come late go to nobody', async () => {
    const redis = await gatewayConnection('timeouts', 1000);
    expectOwn(await turn(redis, 0, 2), 0);
    server.pause();
    let replies: unknown[];
    try {
      replies = await turn(redis, 10, 3);
    } finally {
      server.resume();
    }
    expect(replies).toEqual(['error Command timed out', 'error Command timed out', 'error Command timed out']);
    // The late replies of the timed-out calls are read first and dropped: the next turn gets its own.
    expectOwn(await turn(redis, 20, 4), 20);
    expectOwn(await turn(redis, 30, 1), 30);
    redis.disconnect();
  });
});

describe('the quota store on a single server', () => {
  it('answers a packed turn of several plans and keys after SCRIPT FLUSH as before it', async () => {
    const redis = await gatewayConnection('store');
    const store = new RedisQuotaStore(redis);
    const ban: BanPolicy = { afterRejections: 3, window: 60, duration: 90 };
    const plans: Quota[] = [
      { perMinute: 2, perDay: 100 },
      { perMinute: 3, perDay: 100, algorithm: 'gcra', burst: 1 },
      { perMinute: 2, perDay: 100, perMonth: 1000 },
    ];
    const round = (tag: string) =>
      Promise.all(Array.from({ length: 12 }, (_, i) => store.consume(`${tag}-${i % 4}`, plans[i % 3]!, ban, 1).then((o) => o.verdict)));
    const before = await round('a');
    await fixture.script('FLUSH');
    expect(await round('b')).toEqual(before);
    expect(before).toContain('limited');
    expect(before).toContain('allowed');
    redis.disconnect();
  });
});
