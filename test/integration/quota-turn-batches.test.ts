import { describe, expect, it } from 'vitest';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { redisForFile } from '../helpers/redis-for-file.js';

// The Redis quota store decides the requests of one key that arrive in one event-loop turn in one
// script call (src/store/redis/turn-batches.ts). These tests count the calls Redis received
// (INFO commandstats) and check that the merged decisions are the one-at-a-time ones.

const redis = redisForFile();
const quota = { perMinute: 1000, perDay: 1000 };
const ban = { afterRejections: 3, window: 60, duration: 120 };
let keys = 0;
// An injected clock in the middle of a minute: the counts below must not meet a window edge.
const NOON = Date.UTC(2026, 0, 1, 12, 0, 30);
const newStore = () => new RedisQuotaStore(redis.client(), () => NOON);

async function scriptCalls(): Promise<number> {
  const stats = await redis.client().info('commandstats');
  const calls = (name: string) => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
  return calls('evalsha') + calls('eval');
}

describe('quota decisions of one turn', () => {
  it('are one script call per key, decided in arrival order', async () => {
    const store = newStore();
    const [a, b] = [`batch${++keys}`, `batch${++keys}`];
    await store.consume(a, quota, ban); // loads the script, so EVALSHA is all that follows
    const before = await scriptCalls();
    const outcomes = await Promise.all([
      ...Array.from({ length: 40 }, () => store.consume(a, quota, ban)),
      ...Array.from({ length: 10 }, () => store.consume(b, quota, ban, 2)),
    ]);
    // One call for both keys on a single server (multi-quota-script.ts).
    expect((await scriptCalls()) - before).toBe(1);
    expect(outcomes.slice(0, 40).map((o) => o.minuteCount)).toEqual(Array.from({ length: 40 }, (_, i) => i + 2));
    expect(outcomes.slice(40).map((o) => o.dayCount)).toEqual(Array.from({ length: 10 }, (_, i) => 2 * (i + 1)));
  });

  it('of many keys share few calls, and each key is decided on its own windows', async () => {
    const store = newStore();
    const small = { perMinute: 3, perDay: 100 };
    const larger = { perMinute: 5, perDay: 100 };
    const gcra = { perMinute: 4, perDay: 100, algorithm: 'gcra' as const, burst: 4 };
    const plans = [small, larger, gcra];
    const names = Array.from({ length: 200 }, () => `many${++keys}`);
    await store.consume(`many${++keys}`, quota, ban); // loads the scripts
    const before = await scriptCalls();
    // 7 requests of each key in one turn, the keys interleaved: each admits exactly its limit.
    const outcomes = await Promise.all(
      Array.from({ length: 7 }, () => names.map((name, k) => store.consume(name, plans[k % 3]!, ban))).flat(),
    );
    const calls = (await scriptCalls()) - before;
    expect(calls).toBeLessThan(names.length / 10);
    names.forEach((_, k) => {
      const mine = outcomes.filter((_, i) => i % names.length === k);
      const limit = [3, 5, 4][k % 3]!;
      expect(mine.filter((o) => o.verdict === 'allowed')).toHaveLength(limit);
      expect(mine.map((o) => o.dayCount).at(-1)).toBe(limit);
    });
  });

  it('refuse, count refusals and ban within one call exactly as one at a time', async () => {
    const store = newStore();
    const key = `batch${++keys}`;
    const small = { perMinute: 2, perDay: 2 };
    const verdicts = (await Promise.all(Array.from({ length: 8 }, () => store.consume(key, small, ban)))).map((o) => o.verdict);
    // 2 fit, the 3rd ban.afterRejections-th refusal bans, and the rest meet the ban.
    expect(verdicts).toEqual(['allowed', 'allowed', 'limited', 'limited', 'banned', 'banned', 'banned', 'banned']);
    expect((await store.usage(key)).verdict).toBe('banned');
  });

  it('are split into calls of at most 128 requests', async () => {
    const store = newStore();
    const key = `batch${++keys}`;
    await store.consume(key, quota, ban);
    const before = await scriptCalls();
    const outcomes = await Promise.all(Array.from({ length: 300 }, () => store.consume(key, quota, ban)));
    expect((await scriptCalls()) - before).toBe(3);
    expect(outcomes.at(-1)!.minuteCount).toBe(301);
  });

  it('under different limits in one turn (a reload between them) are steps in arrival order, one per run', async () => {
    const store = newStore();
    const key = `batch${++keys}`;
    await store.consume(key, quota, ban);
    const before = await scriptCalls();
    const reloaded = { perMinute: 3, perDay: 1000 };
    const outcomes = await Promise.all([
      store.consume(key, quota, ban),
      store.consume(key, { ...quota }, ban), // equal limits, another object: same run
      store.consume(key, reloaded, ban),
      store.consume(key, quota, ban),
    ]);
    // Three steps (one per run), sent as one call's sections in order (multi-quota-script.ts).
    expect((await scriptCalls()) - before).toBe(1);
    // 1 before; 2 and 3 under the old limits; the 4th is refused under perMinute 3; then 4 again.
    expect(outcomes.map((o) => [o.verdict, o.dayCount])).toEqual([
      ['allowed', 2],
      ['allowed', 3],
      ['limited', 3],
      ['allowed', 4],
    ]);
  });
});
