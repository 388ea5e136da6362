import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { DegradedMode } from '../../src/gateway/degraded-mode.js';
import { MemoryQuotaStore } from '../../src/store/memory/memory-quota-store.js';

// The memory store's concurrency slots (maxConcurrent): taken in the quota step once the windows
// have room, never charged when refused, counted towards no ban, living until given back or
// until their life ends unrenewed; on an injected clock.

const QUOTA: Quota = { perMinute: 3, perDay: 100, maxConcurrent: 2 };
const BAN: BanPolicy = { afterRejections: 2, window: 60, duration: 600 };
const LIFE_MS = 7000;

function storeAt(startMs = Date.UTC(2026, 0, 5, 12, 0, 10)) {
  const clock = { nowMs: startMs };
  const store = new MemoryQuotaStore(() => clock.nowMs);
  let n = 0;
  const claim = () => ({ member: `r:${++n}`, max: QUOTA.maxConcurrent!, lifeMs: LIFE_MS });
  const consume = (subject = 'k1', slot = claim()) => store.consume(subject, QUOTA, BAN, 1, undefined, undefined, slot);
  return { clock, store, claim, consume };
}

describe('memory quota store: concurrency slots', () => {
  it('admits maxConcurrent at once; the next is `concurrent`, charged nothing and counted towards no ban', async () => {
    const { store, consume } = storeAt();
    expect((await consume()).verdict).toBe('allowed');
    expect((await consume()).verdict).toBe('allowed');
    // Twice the ban's count of refusals: none of them counts.
    for (let i = 0; i < 4; i++) {
      const refused = await consume();
      expect([refused.verdict, refused.minuteCount, refused.rejections]).toEqual(['concurrent', 2, 0]);
    }
    expect(await store.slots.count('k1')).toBe(2);
    // Another subject has slots of its own.
    expect((await consume('k2')).verdict).toBe('allowed');
  });

  it('takes no slot for a request the windows refuse', async () => {
    const { store, consume } = storeAt();
    const first = { member: 'a', max: 2, lifeMs: LIFE_MS };
    await consume('k1', first);
    await store.slots.release('k1', ['a']);
    await consume();
    await store.slots.release('k1', ['r:1']);
    await consume();
    // Three admitted (perMinute 3), one slot still held; the fourth is refused by the minute.
    const limited = await consume();
    expect(limited.verdict).toBe('limited');
    expect(await store.slots.count('k1')).toBe(1);
  });

  it('frees a slot given back, and one whose life ended unrenewed; a renewed one lives on', async () => {
    const { clock, store, claim, consume } = storeAt();
    const a = claim();
    const b = claim();
    await consume('k1', a);
    await consume('k1', b);
    expect((await consume()).verdict).toBe('concurrent');
    await store.slots.release('k1', [a.member]);
    // Given back twice: the second changes nothing.
    await store.slots.release('k1', [a.member]);
    expect(await store.slots.count('k1')).toBe(1);
    const c = claim();
    expect((await consume('k1', c)).verdict).toBe('allowed');
    // c is renewed, b is not: once b's life has passed only c is counted.
    clock.nowMs += LIFE_MS - 1000;
    await store.slots.renew(new Map([['k1', [c.member]]]), LIFE_MS);
    clock.nowMs += 1000;
    expect(await store.slots.count('k1')).toBe(1);
    expect(await store.slots.take('k1', claim())).toBe(true);
    expect(await store.slots.take('k1', claim())).toBe(false);
  });
});

describe('degraded mode: concurrency slots', () => {
  it("admits this replica's share of maxConcurrent (max / replicas, at least 1), in its own memory", async () => {
    const quota: Quota = { perMinute: 100, perDay: 1000, maxConcurrent: 7 };
    const degraded = new DegradedMode('local', 3, new MemoryQuotaStore(), pino({ level: 'silent' }), 100);
    let n = 0;
    const decide = () => degraded.decide('k1', quota, BAN, 1, { member: `r:${++n}`, max: 7, lifeMs: LIFE_MS });
    const verdicts = [];
    for (let i = 0; i < 3; i++) verdicts.push((await decide()).outcome.verdict);
    expect(verdicts).toEqual(['allowed', 'allowed', 'concurrent']);
    // The slots are given back where they were taken.
    const { slots, slot } = await decide();
    expect(slot?.max).toBe(2);
    await slots.release('k1', ['r:1']);
    expect((await decide()).outcome.verdict).toBe('allowed');
    // A limit below the number of replicas still admits one per replica.
    const one = new DegradedMode('local', 3, new MemoryQuotaStore(), pino({ level: 'silent' }), 100);
    const single = { member: 'x', max: 1, lifeMs: LIFE_MS };
    expect((await one.decide('k1', { ...quota, maxConcurrent: 1 }, BAN, 1, single)).outcome.verdict).toBe('allowed');
  });
});
