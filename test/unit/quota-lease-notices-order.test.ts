import { describe, expect, it } from 'vitest';
import { QuotaLeases } from '../../src/quota/quota-leases.js';
import { MINUTE, NO_BANS, notice, QUOTA, scriptedStore, SETTINGS } from '../helpers/scripted-lease-store.js';

// The order of lease notices against grants (rule 10 of src/quota/quota-leases.ts). A notice and a
// grant's reply come on different connections, so a newer notice can arrive first: the lease must
// end up with the newer counts either way. The store here is a script of replies, in a chosen order.

const settle = () => new Promise((resolve) => setImmediate(resolve));

/** A replica that has asked for a lease of 'k' (three units in one second), the ask unanswered. */
function asking() {
  const { store, asks, hooks } = scriptedStore();
  const leases = new QuotaLeases(store, SETTINGS, () => 5_000);
  for (let i = 0; i < 3; i++) expect(leases.admit('k', QUOTA, NO_BANS, 1)).toBeUndefined();
  expect(asks).toHaveLength(1);
  return { leases, asks, hooks };
}

describe('lease notices and grants in either order', () => {
  it('a notice newer than the grant, arriving before it, is applied to the new lease', async () => {
    const { leases, asks, hooks } = asking();
    hooks.apply!(notice(5, 900));
    asks[0]!.answer({ granted: 10, minuteCount: 500, dayCount: 500, seq: 4 });
    await settle();
    const outcome = (await leases.admit('k', QUOTA, NO_BANS, 1))!;
    // 900 counted, 9 of them still unused here.
    expect(outcome.minuteCount).toBe(891);
    expect(leases.lastHeard('k')).toBe(5);
  });

  it('an older notice, arriving after the grant, changes nothing', async () => {
    const { leases, asks, hooks } = asking();
    asks[0]!.answer({ granted: 10, minuteCount: 500, dayCount: 500, seq: 4 });
    await settle();
    hooks.apply!(notice(3, 200));
    hooks.apply!(notice(4, 200));
    expect((await leases.admit('k', QUOTA, NO_BANS, 1))!.minuteCount).toBe(491);
  });

  it('a renewal keeps the newer counts a notice brought to the lease it replaces', async () => {
    const { leases, asks, hooks } = asking();
    asks[0]!.answer({ granted: 10, minuteCount: 500, dayCount: 500, seq: 4 });
    await settle();
    // Half the block used: a renewal is asked for.
    for (let i = 0; i < 6; i++) void leases.admit('k', QUOTA, NO_BANS, 1);
    expect(asks).toHaveLength(2);
    hooks.apply!(notice(7, 800));
    asks[1]!.answer({ granted: 10, minuteCount: 700, dayCount: 700, seq: 6 });
    await settle();
    // 800 counted; unused here: 4 of the first block and 10 of the renewal, less this request's 1.
    expect((await leases.admit('k', QUOTA, NO_BANS, 1))!.minuteCount).toBe(800 - 13);
    expect(leases.lastHeard('k')).toBe(7);
  });

  it('a ban notice ends the lease and gives its units back; so does a lost subscription', async () => {
    type Hooks = ReturnType<typeof scriptedStore>['hooks'];
    const ways = [(h: Hooks) => h.apply!(notice(6, 600, { bannedUntilMs: MINUTE + 60_000 })), (h: Hooks) => h.gap!()];
    for (const lose of ways) {
      const { leases, asks, hooks } = asking();
      asks[0]!.answer({ granted: 10, minuteCount: 500, dayCount: 500, seq: 4 });
      await settle();
      expect(leases.held('k')).toBe(10);
      lose(hooks);
      expect(leases.held('k')).toBe(0);
      expect(leases.admit('k', QUOTA, NO_BANS, 1)).toBeUndefined();
      await settle();
      expect(asks.some(({ request }) => request.giveBack === 10)).toBe(true);
    }
  });

  it('a notice from a later minute leaves the lease counts alone, and reaches a renewal granted in that minute', async () => {
    const { leases, asks, hooks } = asking();
    asks[0]!.answer({ granted: 10, minuteCount: 500, dayCount: 500, seq: 4 });
    await settle();
    hooks.apply!(notice(9, 30, { minuteStartMs: MINUTE + 60_000, dayCount: 530 }));
    expect((await leases.admit('k', QUOTA, NO_BANS, 1))!.minuteCount).toBe(491);
    for (let i = 0; i < 5; i++) void leases.admit('k', QUOTA, NO_BANS, 1);
    expect(asks).toHaveLength(2);
    asks[1]!.answer({ granted: 10, minuteStartMs: MINUTE + 60_000, minuteCount: 20, dayCount: 520, seq: 8 });
    await settle();
    expect(leases.lastHeard('k')).toBe(9);
    expect((await leases.admit('k', QUOTA, NO_BANS, 1))!.minuteCount).toBe(30 - 9);
  });
});
