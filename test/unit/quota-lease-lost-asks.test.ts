import { describe, expect, it } from 'vitest';
import { scriptedReplica, SETTINGS, settle } from '../helpers/scripted-lease-store.js';

// An ask whose answer never came (rule 5 of src/quota/quota-leases.ts): Redis may have granted it,
// and the replica never uses that block, so the key's next ask names it (`cancelFrom`) and Redis
// gives it back in the same step. That is exact only while a replica's asks of a key go one at a
// time: a later ask must not be answered before an earlier one. On a replica whose store is a
// script of replies.

describe('lease asks whose answers never came', () => {
  it("are named by the key's next asks, from the first one, until an ask is answered", async () => {
    const { asks, send } = scriptedReplica();
    send(3);
    expect(asks).toHaveLength(1);
    expect(asks[0]!.request.cancelFrom).toBeUndefined();
    asks[0]!.fail(new Error('Connection is closed.'));
    await settle();
    send(1);
    expect(asks[1]!.request.cancelFrom).toBe(asks[0]!.request.block);
    asks[1]!.fail(new Error('Command timed out'));
    await settle();
    send(1);
    // Both unanswered: Redis may hold either one's grant as this replica's last.
    expect(asks[2]!.request.cancelFrom).toBe(asks[0]!.request.block);
    asks[2]!.answer({ granted: 10, seq: 4 });
    await settle();
    // Answered: that step gave back whatever the two were granted. The renewal names none.
    send(6);
    expect(asks).toHaveLength(4);
    expect(asks[3]!.request.cancelFrom).toBeUndefined();
  });

  it('a renewal whose answer never came is named by the next renewal', async () => {
    const { asks, send, renewalOnItsWay } = scriptedReplica();
    await renewalOnItsWay();
    expect(asks).toHaveLength(2);
    asks[1]!.fail(new Error('Connection is closed.'));
    await settle();
    send(1);
    expect(asks).toHaveLength(3);
    expect(asks[2]!.request.cancelFrom).toBe(asks[1]!.request.block);
  });

  it('no lease is asked for while a renewal is on its way: a later ask is never answered before it', async () => {
    const { leases, asks, clock, send, renewalOnItsWay } = scriptedReplica();
    await renewalOnItsWay();
    expect(asks).toHaveLength(2);
    // The lease lapses with its renewal still on its way; the key is as hot as ever.
    clock.nowMs += 2 * SETTINGS.leaseMs;
    send(5);
    expect(leases.held('k')).toBe(0);
    expect(asks).toHaveLength(2);
    // The renewal's answer comes: its block goes straight back (its lease is gone). Then the key asks anew.
    asks[1]!.answer({ granted: 10, seq: 5 });
    await settle();
    expect(asks.slice(2).map(({ request }) => request.want)).toEqual([0]);
    asks[2]!.answer({ granted: 0, seq: 6 });
    await settle();
    send(1);
    expect(asks.at(-1)!.request.want).toBeGreaterThan(0);
  });
});
