import { describe, expect, it } from 'vitest';
import { DECISION_INDEX, TrafficCounters } from '../../src/observability/traffic.js';

// The console's in-process counters, on an injected clock: per-second series by decision, top
// keys over five minutes, ban candidates, and the bounds that keep the heap flat.

function counters(startMs = Date.parse('2026-11-25T10:00:00Z')) {
  const clock = { nowMs: startMs };
  return { clock, traffic: new TrafficCounters(() => clock.nowMs) };
}

describe('TrafficCounters', () => {
  it('counts each second by decision, oldest first, the current second last', () => {
    const { clock, traffic } = counters();
    traffic.record('a', DECISION_INDEX.admitted);
    traffic.record(undefined, DECISION_INDEX.unauthenticated);
    clock.nowMs += 1000;
    traffic.record('a', DECISION_INDEX.limited);
    const series = traffic.series(3);
    expect(series.map((s) => s.at)).toEqual(['2026-11-25T09:59:59.000Z', '2026-11-25T10:00:00.000Z', '2026-11-25T10:00:01.000Z']);
    expect(series.map((s) => [s.counts.admitted, s.counts.unauthenticated, s.counts.limited])).toEqual([
      [0, 0, 0],
      [1, 1, 0],
      [0, 0, 1],
    ]);
  });

  it('forgets seconds older than five minutes, also after a long pause without requests', () => {
    const { clock, traffic } = counters();
    traffic.record('a', DECISION_INDEX.admitted);
    clock.nowMs += 300_000; // the same ring slot, five minutes on
    expect(traffic.series(300).every((s) => s.counts.admitted === 0)).toBe(true);
    traffic.record('a', DECISION_INDEX.banned);
    expect(traffic.series(300).reduce((n, s) => n + s.counts.admitted + s.counts.banned, 0)).toBe(1);
  });

  it('ranks keys by requests and by refusals over five minutes, and lists banned keys', () => {
    const { clock, traffic } = counters();
    for (let i = 0; i < 5; i++) traffic.record('busy', DECISION_INDEX.admitted);
    traffic.record('refused', DECISION_INDEX.limited);
    traffic.record('refused', DECISION_INDEX.banned);
    clock.nowMs += 60_000;
    traffic.record('refused', DECISION_INDEX.banned);
    const top = traffic.topKeys(5, 10);
    expect(top.byRequests).toEqual([
      { id: 'busy', requests: 5, refusals: 0 },
      { id: 'refused', requests: 3, refusals: 3 },
    ]);
    expect(top.byRefusals).toEqual([{ id: 'refused', requests: 3, refusals: 3 }]);
    expect(traffic.bannedKeyIds(5)).toEqual(['refused']);
    clock.nowMs += 5 * 60_000;
    expect(traffic.topKeys(5, 10).byRequests).toEqual([]);
    expect(traffic.bannedKeyIds(5)).toEqual([]);
  });

  it('tracks at most 10,000 keys a minute one by one; the rest only in the totals', () => {
    const { traffic } = counters();
    for (let i = 0; i < 10_005; i++) traffic.record(`k${i}`, DECISION_INDEX.admitted);
    const top = traffic.topKeys(1, 1);
    expect(top.untrackedRequests).toBe(5);
    expect(traffic.series(1)[0]!.counts.admitted).toBe(10_005);
  });
});
