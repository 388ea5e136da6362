import { describe, expect, it } from 'vitest';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { quotaKey } from '../../src/store/redis/redis-keys.js';
import { redisForFile } from '../helpers/redis-for-file.js';

// One key's failing step in a turn's packed call (multi-quota-script.ts): a key whose hash holds
// another type (an operator's hand edit, a stray SET) makes Redis raise an error in that key's
// section. The other keys of the same call are decided and told their own answers, never the
// error, and each is charged once: a script's writes are not undone by its error, so a call that
// failed as a whole left the keys before the broken one charged for requests told they failed.

const redis = redisForFile();
const quota = { perMinute: 10, perDay: 100 };
const ban = { afterRejections: 3, window: 60, duration: 120 };
const NOON = Date.UTC(2026, 0, 1, 12, 0, 30);
let keys = 0;

describe('a packed call with one broken key', () => {
  for (const brokenAt of [0, 2, 4]) {
    it(`(the ${brokenAt + 1}. of 5) fails that key alone; the others are answered and charged once`, async () => {
      const store = new RedisQuotaStore(redis.client(), () => NOON);
      const names = Array.from({ length: 5 }, () => `section${++keys}`);
      await redis.client().set(quotaKey(names[brokenAt]!), 'x');
      const settled = await Promise.all(
        names.map((name) =>
          store.consume(name, quota, ban).then(
            (o) => o,
            (err: Error) => err,
          ),
        ),
      );
      expect(settled[brokenAt]).toBeInstanceOf(Error);
      expect((settled[brokenAt] as Error).message).toMatch(/WRONGTYPE/);
      for (const [i, answer] of settled.entries()) {
        if (i === brokenAt) continue;
        expect(answer).toMatchObject({ verdict: 'allowed', minuteCount: 1 });
        expect((await store.usage(names[i]!, quota)).minuteCount).toBe(1);
      }
    });
  }
});
