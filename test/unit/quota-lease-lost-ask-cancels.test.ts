import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { CANCEL_AFTER_MS } from '../../src/quota/quota-leases.js';
import { scriptedReplica, settle } from '../helpers/scripted-lease-store.js';

// An ask whose answer never came (rule 5 of src/quota/quota-leases.ts) is named by the key's next
// ask. A key that asks no more (a warm key that stopped calling, a hot key gone quiet) has it named
// alone CANCEL_AFTER_MS later, by a step that asks for nothing, so that the block Redis may have
// granted is not left counted until its windows end. That step is an ask: exact only while none
// other of the key goes out beside it. On a replica whose store is a script of replies; timers
// faked (setTimeout only), promises real.

/** What a named-alone step must ask: nothing granted, nothing given back, the lost ask named. */
const cancelOf = (block: number | undefined) => ({ want: 0, giveBack: 0, cancelFrom: block, ends: false });

describe('an unanswered ask of a key that asks no more', () => {
  beforeEach(() => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] }));
  afterEach(() => vi.useRealTimers());

  it('is named alone CANCEL_AFTER_MS later, and forgotten once that step is answered', async () => {
    const { asks, send, loseFirstAsk } = scriptedReplica();
    await loseFirstAsk();
    vi.advanceTimersByTime(CANCEL_AFTER_MS - 1);
    expect(asks).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(asks).toHaveLength(2);
    expect(asks[1]!.request).toMatchObject(cancelOf(asks[0]!.request.block));
    asks[1]!.answer({ granted: 0, seq: 5 });
    await settle();
    // Named: the key's next ask names nothing, and no other step follows.
    send(3);
    expect(asks).toHaveLength(3);
    expect(asks[2]!.request.cancelFrom).toBeUndefined();
    vi.advanceTimersByTime(10 * CANCEL_AFTER_MS);
    expect(asks).toHaveLength(3);
  });

  it('is tried again while Redis does not answer, and while that step is on its way the key asks for nothing', async () => {
    const { asks, send, loseFirstAsk } = scriptedReplica();
    await loseFirstAsk('Connection is closed.');
    vi.advanceTimersByTime(CANCEL_AFTER_MS);
    expect(asks[1]!.request).toMatchObject(cancelOf(asks[0]!.request.block));
    // The key, hot again, asks nothing beside the step on its way: its requests go to the store.
    expect(send(5).every((answer) => answer === undefined)).toBe(true);
    expect(asks).toHaveLength(2);
    asks[1]!.fail(new Error('Command timed out'));
    await settle();
    vi.advanceTimersByTime(CANCEL_AFTER_MS);
    expect(asks).toHaveLength(3);
    expect(asks[2]!.request).toMatchObject(cancelOf(asks[0]!.request.block));
    asks[2]!.answer({ granted: 0, seq: 5 });
    await settle();
    send(1);
    expect(asks).toHaveLength(4);
    expect(asks[3]!.request.cancelFrom).toBeUndefined();
    expect(asks[3]!.request.want).toBeGreaterThan(0);
  });

  it("is not named alone when the key's next ask names it, on its way or answered", async () => {
    const { asks, send, loseFirstAsk } = scriptedReplica();
    await loseFirstAsk();
    send(1);
    expect(asks[1]!.request).toMatchObject({ cancelFrom: asks[0]!.request.block });
    expect(asks[1]!.request.want).toBeGreaterThan(0);
    // Its ask still on its way when the step was due: none goes out beside it.
    vi.advanceTimersByTime(CANCEL_AFTER_MS);
    expect(asks).toHaveLength(2);
    asks[1]!.answer({ granted: 10, seq: 4 });
    await settle();
    vi.advanceTimersByTime(10 * CANCEL_AFTER_MS);
    expect(asks).toHaveLength(2);
  });

  it('a renewal whose answer never came: named alone while the lease admits on, never beside its next renewal', async () => {
    const { leases, asks, send, renewalOnItsWay } = scriptedReplica();
    await renewalOnItsWay();
    expect(asks).toHaveLength(2);
    asks[1]!.fail(new Error('Command timed out'));
    await settle();
    vi.advanceTimersByTime(CANCEL_AFTER_MS);
    expect(asks[2]!.request).toMatchObject(cancelOf(asks[1]!.request.block));
    // The lease's last units: admitted from it, but no renewal goes out beside the step.
    expect(leases.held('k')).toBe(4);
    send(2);
    expect(leases.held('k')).toBe(2);
    expect(asks).toHaveLength(3);
    asks[2]!.answer({ granted: 0, seq: 5 });
    await settle();
    send(1);
    expect(asks).toHaveLength(4);
    expect(asks[3]!.request.cancelFrom).toBeUndefined();
  });
});
