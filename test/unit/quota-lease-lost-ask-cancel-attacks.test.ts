import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Quota } from '../../src/config/plans-schema.js';
import { CANCEL_AFTER_MS } from '../../src/quota/quota-leases.js';
import { QUOTA, scriptedReplica, settle } from '../helpers/scripted-lease-store.js';

// Review of 0e9d74a (cancelLost: a lost ask named alone CANCEL_AFTER_MS later). The step is sent
// under a quota: its day and month edges decide which windows Redis reads as current, and a step
// that gives units back writes the state it read. Under a quota the key no longer has (a billing
// anchor or time zone changed since the lost ask) it reads the key's current month, or day, as
// ended and writes it back at 0 (test/integration/lease-lost-ask-cancels.test.ts).
// Before this change only the key's next ask named a lost one, under the key's quota then.

const MOVED: Quota = { ...QUOTA, calendar: { timeZone: 'UTC', anchorDay: 15 } };

describe('a lost ask named alone after its key changed', () => {
  beforeEach(() => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] }));
  afterEach(() => vi.useRealTimers());

  it('is not named under the quota the key had before its change', async () => {
    const { leases, asks, loseFirstAsk } = scriptedReplica();
    await loseFirstAsk();
    // The key's record changed (keys.onChange): its quota is another from now on.
    leases.forget('k');
    vi.advanceTimersByTime(5 * CANCEL_AFTER_MS);
    for (const ask of asks.slice(1)) expect(ask.quota).not.toBe(QUOTA);
  });

  it('an ask on its way when the key changed, lost: not named under the quota it was sent with', async () => {
    const { leases, asks, send } = scriptedReplica();
    send(3);
    leases.forget('k');
    asks[0]!.fail(new Error('Command timed out'));
    await settle();
    vi.advanceTimersByTime(5 * CANCEL_AFTER_MS);
    for (const ask of asks.slice(1)) expect(ask.quota).not.toBe(QUOTA);
  });

  it("a renewal on its way when the key changed, lost: not named under its lease's quota", async () => {
    const { leases, asks, renewalOnItsWay } = scriptedReplica();
    await renewalOnItsWay();
    expect(asks).toHaveLength(2);
    leases.forget('k');
    asks[1]!.fail(new Error('Command timed out'));
    await settle();
    vi.advanceTimersByTime(5 * CANCEL_AFTER_MS);
    for (const ask of asks.slice(2)) expect(ask.request.cancelFrom === undefined || ask.quota !== QUOTA).toBe(true);
  });

  it("is named under the key's quota once the key calls again", async () => {
    const { leases, asks, send, clock, loseFirstAsk } = scriptedReplica();
    await loseFirstAsk();
    leases.forget('k');
    // One request under its new quota (not hot: no ask of its own), a second later.
    clock.nowMs += 2000;
    send(1, MOVED);
    vi.advanceTimersByTime(2 * CANCEL_AFTER_MS);
    const cancel = asks.find((ask) => ask.request.cancelFrom !== undefined);
    expect(cancel?.quota).toBe(MOVED);
    expect(cancel?.request).toMatchObject({ want: 0, cancelFrom: asks[0]!.request.block });
  });

  it("a plans reload (the key's quota another object): named under the one the key calls with", async () => {
    const { asks, send, clock, loseFirstAsk } = scriptedReplica();
    await loseFirstAsk();
    clock.nowMs += 2000;
    send(1, MOVED);
    vi.advanceTimersByTime(CANCEL_AFTER_MS);
    const cancel = asks.find((ask) => ask.request.cancelFrom !== undefined);
    expect(cancel?.quota).toBe(MOVED);
  });
});

describe('a lost ask not yet named alone when the replica shuts down', () => {
  beforeEach(() => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] }));
  afterEach(() => vi.useRealTimers());

  // docs/quota-leases.md: "Only a killed replica's lost asks stay counted". close() waited for the
  // steps on their way, and the pending named-alone step, seeing `closed`, sent nothing.
  it('is named once by close(), and no timer sends it again after', async () => {
    const { leases, asks, loseFirstAsk } = scriptedReplica();
    await loseFirstAsk();
    const closed = leases.close();
    await settle();
    expect(asks).toHaveLength(2);
    expect(asks[1]!.request).toMatchObject({ want: 0, giveBack: 0, cancelFrom: asks[0]!.request.block });
    asks[1]!.fail(new Error('Connection is closed.'));
    await closed;
    vi.advanceTimersByTime(10 * CANCEL_AFTER_MS);
    expect(asks).toHaveLength(2);
  });

  it('an ask on its way at shutdown that fails: named once close() has its answer', async () => {
    const { leases, asks, send } = scriptedReplica();
    send(3);
    const closed = leases.close();
    asks[0]!.fail(new Error('Command timed out'));
    await settle();
    await settle();
    expect(asks).toHaveLength(2);
    expect(asks[1]!.request).toMatchObject({ want: 0, cancelFrom: asks[0]!.request.block });
    asks[1]!.answer({ granted: 0, seq: 5 });
    await closed;
  });
});
